"""The web UI on a large job: 10,000 trials (``--trials``: 100,000) with 30 interim metrics each, in the real browser.

A fresh ``baobab up`` (SQLite unless ``--database-url``) gets a finished train job filled
straight into its store (``scale_api.fill_job``): one template with four knobs and a
policy, 10,000 trials over ten hours (scores from the knobs plus noise, a few ERRORED,
STOPPED and CANCELLED), and 30 interim metrics per trial (300,000 rows; at most 3,000,000
rows in all, so 30 at 100,000 trials too). Then headless Chromium (Debian's, through
playwright) opens the job page, signed in, and the script measures:

- **time to interactive**: from navigation to the page holding the job, the first page of
  the trials table, and all four charts drawn (the page reads the server's sample of the
  trials, ``trials/sample``: the trials its downsampled charts draw, a few thousand, chosen
  in the database; then it polls ``trials/changes`` from there);
- **table sort**: from a click on a column header to the table showing the new order
  (the server sorts and pages), for each sortable column in turn; the median and the worst;
- for comparison at the API: the sample, what the page read before it (every trial's point
  in one ``trials/changes`` read), a poll with nothing new, and what a page without the
  changes feed would pay per poll (every trial again, through the paged list, 500 a page).

Each browser figure is the median of ``--repeats`` page loads (a new browser context each,
so nothing is cached but the HTTP cache of the built assets). Results go to
``bench/results/web_large_job.json`` and ``.md`` (10,000 trials), or
``web_large_job_<trials>.json`` and ``.md``.

    .venv/bin/python bench/web_large_job.py                 # about a minute
    .venv/bin/python bench/web_large_job.py --trials 100000 --database-url postgresql://...   # about five
    .venv/bin/python bench/web_large_job.py --screenshot docs/images/job-page.png
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests
from playwright.sync_api import Page, sync_playwright
from scale_api import fill_job, metrics_per_trial
from setup_record import RunSetup, setup_markdown

from baobab.sdk import Client
from baobab.store import build_tabular, create_engine_from_url
from baobab.testing import LocalPlatform

HERE = Path(__file__).parent
APP = "large"
RESULTS = HERE / "results"
EMAIL, PASSWORD = "bench@example.com", "bench-password"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
SORTS = ["#", "Score", "Duration", "Status", "Worker"]
CHARTS = ["chart-best", "chart-scores", "chart-metrics", "chart-parallel"]
READY = """(charts) => {
    const page = document.querySelector('[data-testid="job-page"]');
    const table = document.querySelector('table[aria-label="trials table"]');
    if (!page || page.dataset.ready !== "true" || !table || table.dataset.loading !== "false") return false;
    if (!table.querySelector("tbody tr[data-trial-id]")) return false;
    for (const id of charts) {
        const chart = document.querySelector(`[data-testid="${id}"]`);
        if (!chart || chart.dataset.shown === "0" || !chart.querySelector("canvas")) return false;
    }
    return performance.now();
}"""


def time_to_interactive(page: Page, url: str) -> float:
    """Seconds from navigation to the job page being usable (see the module docstring)."""
    page.goto(url, wait_until="commit")
    handle = page.wait_for_function(READY, arg=CHARTS, polling="raf", timeout=120_000)
    return float(handle.json_value()) / 1000  # performance.now() counts from the navigation


def charts_shown(page: Page) -> dict[str, list[int]]:
    """Per chart: ``[shown, total]``, the points (or lines) drawn and how many there are."""
    return {
        chart: [int(page.get_attribute(f'[data-testid="{chart}"]', name) or 0) for name in ("data-shown", "data-total")]
        for chart in CHARTS
    }


def time_sort(page: Page, header: str) -> float:
    """Seconds from a click on ``header`` to the table showing the order the server answered."""
    table = page.get_by_role("table", name="trials table")
    before = table.locator("tbody tr").first.get_attribute("data-trial-id")
    sort_before = page.locator("th[aria-sort]:not([aria-sort='none'])").first.inner_text()
    start = time.perf_counter()
    table.get_by_role("button", name=header, exact=True).click()
    page.wait_for_function(
        """([before, sortBefore]) => {
            const table = document.querySelector('table[aria-label="trials table"]');
            const sorted = document.querySelector("th[aria-sort]:not([aria-sort='none'])");
            const first = table.querySelector("tbody tr[data-trial-id]");
            return table.dataset.loading === "false" && first &&
                (first.dataset.trialId !== before || sorted.innerText !== sortBefore);
        }""",
        arg=[before, sort_before],
        polling="raf",
        timeout=60_000,
    )
    return time.perf_counter() - start


def api_timings(url: str, token: str, app: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    base = f"{url}/api/v1/train_jobs/{app}/1/trials"

    def timed(path: str) -> tuple[float, requests.Response]:
        start = time.perf_counter()
        response = requests.get(path, headers=headers, timeout=120)
        response.raise_for_status()
        return time.perf_counter() - start, response

    sample_s, sample = timed(f"{base}/sample?points=2000&lines=600")  # as the page reads it first
    first_s, first = timed(f"{base}/changes?limit=100000")  # as the page read it before: every trial at once
    last_id = first.json()["last_id"]
    quiet_s, quiet = timed(f"{base}/changes?after_id={last_id}")
    start = time.perf_counter()
    page, total = 1, None
    while total is None or (page - 1) * 500 < total:
        answer = requests.get(f"{base}?per_page=500&page={page}&sort=number", headers=headers, timeout=120).json()
        total, page = answer["total"], page + 1
    full_s = time.perf_counter() - start
    table_s, _ = timed(f"{base}?per_page=25&sort=-score")
    return {
        "sample_s": round(sample_s, 3),
        "sample_bytes": len(sample.content),
        "sample_trials": len(sample.json()["trials"]),
        "changes_first_s": round(first_s, 3),
        "changes_first_bytes": len(first.content),
        "changes_quiet_s": round(quiet_s, 4),
        "changes_quiet_bytes": len(quiet.content),
        "refetch_all_paged_s": round(full_s, 3),
        "refetch_all_pages": page - 1,
        "table_page_s": round(table_s, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument(
        "--metrics", type=int, default=30, help="interim metrics per trial, fewer where they would pass 3,000,000 rows"
    )
    parser.add_argument("--repeats", type=int, default=3, help="page loads to take the median of")
    parser.add_argument("--database-url", help="a database to use instead of SQLite in a fresh home (emptied first)")
    parser.add_argument("--screenshot", type=Path, help="also save a screenshot of the job page here")
    parser.add_argument("--no-save", action="store_true", help="print the results only")
    parser.add_argument("--note", help="a line for the results file: what else ran on the machine")
    args = parser.parse_args()
    metrics = metrics_per_trial(args.trials, args.metrics)
    setup = RunSetup(
        "the page: a finished job, so nothing changes while it loads and a poll finds nothing new; one browser "
        "and nothing else reading the server",
        placement="not applicable (no job driver: the job is filled straight into the store)",
        fusion="not applicable (no trial runs)",
        warm_start="not applicable (no trial runs)",
    )

    with tempfile.TemporaryDirectory(prefix="baobab-web-bench-") as folder:
        home = Path(folder) / "home"
        settings = {"BAOBAB_ADMIN_EMAIL": EMAIL, "BAOBAB_ADMIN_PASSWORD": PASSWORD}
        if args.database_url:
            settings["BAOBAB_DATABASE_URL"] = args.database_url
        database_url = args.database_url or f"sqlite:///{home / 'baobab.db'}"
        with LocalPlatform(home, workers=1, settings=settings) as running:
            client = Client(running.url)
            me = client.login(EMAIL, PASSWORD)["user"]
            build_tabular("breast_cancer", Path(folder) / "data")
            dataset = client.create_dataset(
                "bench", Path(folder) / "data" / "train.csv", format="TABULAR", target="target"
            )
            started = time.perf_counter()
            engine = create_engine_from_url(database_url)
            try:
                fill_job(
                    engine, owner_id=me["id"], dataset_id=dataset["id"], app=APP, trials=args.trials,
                    metrics=metrics, seed=1,
                )  # fmt: skip
            finally:
                engine.dispose()
            app = APP
            fill_s = time.perf_counter() - started
            print(f"filled {args.trials} trials x {metrics} metrics in {fill_s:.1f} s", file=sys.stderr)
            token = client.token
            assert token is not None
            api = api_timings(running.url, token, app)

            job_url = f"{running.url}/jobs/{app}/1"
            session = {"token": token, "user": me, "expiresAt": time.time() * 1000 + 3_600_000}
            loads: list[float] = []
            shown: dict[str, list[int]] = {}
            sorts: dict[str, list[float]] = {header: [] for header in SORTS}
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                for _ in range(args.repeats):
                    context = browser.new_context(viewport={"width": 1440, "height": 1100})
                    signed_in = f"localStorage.setItem('baobab.session', {json.dumps(json.dumps(session))})"
                    context.add_init_script(signed_in)
                    page = context.new_page()
                    loads.append(time_to_interactive(page, job_url))
                    shown = charts_shown(page)
                    for header in SORTS:
                        sorts[header].append(time_sort(page, header))
                    if args.screenshot and len(loads) == args.repeats:
                        time_to_interactive(page, job_url)  # as it opens: sorted by score
                        page.wait_for_timeout(1500)  # the charts' entry animation
                        page.screenshot(path=args.screenshot, full_page=True)
                    context.close()
                browser.close()

    every_sort = [s for times in sorts.values() for s in times]
    result = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {_cores()} cores, Python {platform.python_version()}",
        "database": "PostgreSQL" if args.database_url else "SQLite",
        "trials": args.trials,
        "interim_metrics_per_trial": metrics,
        "repeats": args.repeats,
        "time_to_interactive_s": {"median": round(statistics.median(loads), 3), "all": [round(x, 3) for x in loads]},
        "table_sort_s": {
            "median": round(statistics.median(every_sort), 3),
            "max": round(max(every_sort), 3),
            "by_column": {h: round(statistics.median(t), 3) for h, t in sorts.items()},
        },
        "charts_shown_of_total": shown,
        "note": args.note,
        "api": api,
        "setup": setup.finish(),
    }
    print(json.dumps(result, indent=2))
    if not args.no_save:
        RESULTS.mkdir(exist_ok=True)
        name = "web_large_job" if args.trials == 10_000 else f"web_large_job_{args.trials}"
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        (RESULTS / f"{name}.md").write_text(_markdown(result))


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _markdown(r: dict[str, Any]) -> str:
    api = r["api"]
    sort = r["table_sort_s"]
    columns = ", ".join(f"{h} {s:.2f}" for h, s in sort["by_column"].items())
    charts = ", ".join(f"{name} {shown:,} of {total:,}" for name, (shown, total) in r["charts_shown_of_total"].items())
    return f"""# The job page on a large job

`bench/web_large_job.py`, {r["date"]}, {r["machine"]}, {r["database"]}, headless Chromium (Debian) through playwright.

One finished job with {r["trials"]:,} trials and {r["interim_metrics_per_trial"]} interim metrics each
({r["trials"] * r["interim_metrics_per_trial"]:,} metric rows), served by `baobab up`; medians of
{r["repeats"]} page loads.

| measure | seconds |
|---|---:|
| time to interactive (job, first table page, all four charts drawn) | {r["time_to_interactive_s"]["median"]:.2f} |
| table sort, click to new order shown (median of every column) | {sort["median"]:.2f} |
| table sort, slowest column | {sort["max"]:.2f} |

Sort by column (median): {columns}.

Drawn of all (the charts say so on the page): {charts}.

What the page's reads cost at the API (the same server, from Python):

| request | seconds | bytes |
|---|---:|---:|
| `trials/sample`, the page's first read ({api["sample_trials"]:,} trials) \
| {api["sample_s"]:.3f} | {api["sample_bytes"]:,} |
| `trials/changes`, every trial's point in one read (the page's first read before `trials/sample`) \
| {api["changes_first_s"]:.3f} | {api["changes_first_bytes"]:,} |
| `trials/changes`, a poll with nothing new | {api["changes_quiet_s"]:.4f} | {api["changes_quiet_bytes"]:,} |
| every trial again through the paged list ({api["refetch_all_pages"]} pages of 500): \
what a page without the changes feed would pay per poll | {api["refetch_all_paged_s"]:.3f} | |
| one table page (25 trials, sorted by score) | {api["table_page_s"]:.4f} | |

The page first reads `trials/sample`: the trials its charts draw, chosen in the database
by the charts' own rules (the best-score line's steps, exact; per combination of policies
the best trial of each cell of a grid, about 2,000 in all; per template the best quarter
of 600 parallel-coordinate lines and an even sample of the rest) and every open trial,
with how many scored trials it left out, so that each chart says how many it shows of
all. Then each poll asks `trials/changes` only for trials above the sample's last id and
those seen PENDING or RUNNING, and keeps all of them. The table is paged, sorted and
filtered by the server; metric curves use ECharts' LTTB sampling.
{f"{chr(10)}{r['note']}{chr(10)}" if r.get("note") else ""}
{setup_markdown(r["setup"])}
"""


if __name__ == "__main__":
    main()
