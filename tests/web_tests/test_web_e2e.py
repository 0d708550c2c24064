"""The web UI end to end: headless Chromium against a real ``baobab up`` with 2 workers.

One journey, as a user would take it: sign in, upload two datasets and a template (and
see the template check's error for a wrong class), create a job with the form (and see
the API's error for a bad budget beside its field), watch the job page until the job
completes and check that its four charts drew, open a trial, serve the best two trials
(logging every request, after the API refused a rate of 2 beside its field), predict in
the playground, see the serving charts draw from the predictor's counters and download
the request log, add a canary version, give it all the requests with the weight sliders,
promote the first version and roll back (each time the page shows the predictor serving
the new revision, and the playground's answers name the version that answered), add an
APP_DEVELOPER, and check that they cannot reach the users page.
A second, shorter one trains a SpaceModel template and opens a trial's page, which draws
the architecture it trained. A third creates a job whose policies and early stopping are
set with the form's controls, and finds them in the job's train args. A fourth shows a GPU job's
sharing decisions on its page. A screenshot of every page goes to ``test-artifacts/web/``.

SQLite only: the platform's own end-to-end test covers both databases, and what this
test adds is the browser.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from playwright.sync_api import Page, expect

from baobab.advisor import STOPPING_RULES
from baobab.sdk import Client
from baobab.store import (
    build_tabular,
    create_engine_from_url,
    record_train_job_gpu_share,
    session_scope,
    write_tabular,
)
from baobab.testing import LocalPlatform

ADMIN_EMAIL = "root@example.com"
ADMIN_PASSWORD = "root-password"
DEVELOPER_EMAIL = "app-dev@example.com"
DEVELOPER_PASSWORD = "app-dev-password"
TEMPLATE = Path(__file__).parent / "templates" / "sgd_tabular.py"
SPACE_TEMPLATE = Path(__file__).parents[1] / "worker_tests" / "templates" / "tiny_space.py"
TRIALS = 6
JOB_TIMEOUT_MS = 120_000
#: A predictor adds a stats point and writes its request log every 10 s, and the page reads both every 10 s.
SERVING_TIMEOUT_MS = 60_000
#: A new version's trials load and warm in fresh inference workers before the predictor switches to it.
VERSIONS_TIMEOUT_MS = 60_000


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[LocalPlatform]:
    platform = LocalPlatform(
        tmp_path / "home",
        workers=2,
        settings={
            "BAOBAB_ADMIN_EMAIL": ADMIN_EMAIL,
            "BAOBAB_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "BAOBAB_CPU_SLOTS": "2",
        },
    )
    with platform:
        yield platform


@pytest.fixture
def page(chromium: Any) -> Iterator[Page]:
    """A page of a fresh context; an uncaught error in the app fails the test."""
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(20_000)
    # Assertions wait as long as actions: an upload's check starts the template in a
    # process of its own, which a busy machine can take longer than expect's 5 s to answer.
    expect.set_options(timeout=20_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert errors == [], f"the app raised: {errors}"


def sign_in(page: Page, url: str, email: str, password: str, screenshot: Path | None = None) -> None:
    page.goto(url)
    expect(page).to_have_url(f"{url}/signin?next=%2Fjobs")
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    if screenshot is not None:
        page.screenshot(path=screenshot)
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Train jobs")).to_be_visible()


def upload_dataset(page: Page, name: str, path: Path) -> None:
    form = page.get_by_role("form", name="upload a dataset")
    form.get_by_label("File").set_input_files(path)
    form.get_by_label("Name").fill(name)
    form.get_by_label("Target column").fill("target")
    form.get_by_role("button", name="Upload").click()
    expect(page.get_by_role("table", name="datasets").get_by_role("cell", name=name, exact=True)).to_be_visible()


def canvas_has_ink(page: Page, test_id: str) -> bool:
    """True when the chart's canvas holds pixels that are not background: it drew."""
    return page.evaluate(
        """(id) => {
            const canvas = document.querySelector(`[data-testid="${id}"] canvas`);
            if (!canvas) return false;
            const { data } = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height);
            let ink = 0;
            for (let i = 0; i < data.length; i += 4) if (data[i + 3] > 0 && data[i] < 200) ink++;
            return ink > 200;
        }""",
        test_id,
    )


def expect_answer_from(page: Page, answered: str | re.Pattern[str]) -> None:
    """Predicts in the playground (the queries typed before) and expects the answer to say who ``answered``."""
    playground = page.get_by_role("region", name="playground")
    playground.get_by_role("button", name="Predict").click()
    expect(playground.get_by_label("predictions").get_by_text("answered by trials")).to_have_text(answered)


def expect_served(page: Page, revision: int) -> None:
    """The versions card says the predictor serves ``revision``, the wanted one."""
    served = page.get_by_role("region", name="versions").get_by_test_id("versions-served")
    expect(served).to_have_attribute("data-revision", str(revision))
    expect(served).to_have_attribute("data-served", str(revision), timeout=VERSIONS_TIMEOUT_MS)
    expect(served).to_have_attribute("data-converged", "true")


def serve_versions_in_the_browser(page: Page, platform: LocalPlatform, artifacts: Path) -> None:
    """On a running job's page: add a canary, move the traffic with the sliders, promote, roll back.

    Each step is a new revision the predictor must serve (the card shows it), and the
    playground's answers name the version that answered them.
    """
    versions = page.get_by_role("region", name="versions")
    expect_served(page, 1)
    expect(versions.get_by_role("button", name="Promote v1")).to_have_count(0)  # one version: nothing to promote
    job_id = int(page.url.rsplit("/", 1)[1])
    client = Client(platform.url)
    client.login(ADMIN_EMAIL, ADMIN_PASSWORD)
    members = client.get_versions(job_id)["versions"][0]["trial_ids"]
    canary = next(
        trial["id"] for trial in client.get_trials("bc", status="COMPLETED")["trials"] if trial["id"] not in members
    )

    # A canary of another trial, with a quarter of the requests; an unknown trial is refused beside the field.
    form = versions.get_by_role("form", name="add a version")
    expect(form.get_by_label("Version name")).to_have_value("v2")
    form.get_by_label("Trial ids").fill("999999")
    form.get_by_role("button", name="Add version").click()
    expect(form.locator(".field", has=page.get_by_label("Trial ids")).get_by_role("alert")).to_contain_text("999999")
    form.get_by_label("Trial ids").fill(str(canary))
    form.get_by_label("Share of the requests (%)").fill("25")
    form.get_by_role("button", name="Add version").click()
    expect_served(page, 2)
    expect(versions.get_by_test_id("share-v1")).to_have_text("75%")
    expect(versions.get_by_test_id("share-v2")).to_have_text("25%")
    expect(versions.get_by_test_id("version-v2")).to_contain_text(f"#{canary}")
    page.screenshot(path=artifacts / "11b-inference-canary.png", full_page=True)

    # The sliders give v2 all the requests: the predictor's answers come from it.
    versions.get_by_label("Weight of v1").fill("0")
    versions.get_by_label("Weight of v2").fill("100")
    expect(versions.get_by_test_id("share-v2")).to_have_text("100%")
    versions.get_by_role("button", name="Apply weights").click()
    expect_served(page, 3)
    expect_answer_from(page, f"version v2: answered by trials #{canary}")
    wanted = [
        (version["name"], version["weight"], version["trial_ids"])
        for version in client.get_versions(job_id)["versions"]
    ]
    assert wanted == [("v1", 0, members), ("v2", 100, [canary])]

    # Promote v1 (after a confirmation): it alone serves.
    page.once("dialog", lambda dialog: dialog.accept())
    versions.get_by_role("button", name="Promote v1").click()
    expect_served(page, 4)
    expect(versions.get_by_test_id("version-v2")).to_have_count(0)
    expect_answer_from(page, re.compile(r"^version v1: answered by trials #\d+"))
    page.screenshot(path=artifacts / "11c-inference-promoted.png", full_page=True)

    # Roll back: the versions before the promotion, v2 with all the requests, are served again.
    page.once("dialog", lambda dialog: dialog.accept())
    versions.get_by_role("button", name="Roll back to revision 3").click()
    expect_served(page, 5)
    expect(versions.get_by_test_id("share-v2")).to_have_text("100%")
    expect_answer_from(page, f"version v2: answered by trials #{canary}")
    expect(versions.get_by_role("button", name="Roll back to revision 2")).to_be_visible()


def test_create_watch_and_serve_a_job_in_the_browser(
    platform: LocalPlatform, page: Page, artifacts: Path, tmp_path: Path
) -> None:
    url = platform.url
    data = tmp_path / "breast_cancer"
    build_tabular("breast_cancer", data)

    # Sign in; the role decides the navigation.
    sign_in(page, url, ADMIN_EMAIL, ADMIN_PASSWORD, screenshot=artifacts / "01-sign-in.png")
    expect(page.get_by_role("navigation", name="main").get_by_role("link", name="Users")).to_be_visible()

    # Datasets, with a progress bar while uploading.
    page.get_by_role("link", name="Datasets").click()
    upload_dataset(page, "bc train", data / "train.csv")
    upload_dataset(page, "bc val", data / "val.csv")
    page.screenshot(path=artifacts / "02-datasets.png", full_page=True)

    # A template: the check's error for a wrong class is shown beside the file, as the API gives it.
    page.get_by_role("link", name="Model templates").click()
    form = page.get_by_role("form", name="upload a model template")
    form.get_by_label("Template file").set_input_files(TEMPLATE)
    form.get_by_label("Class name").fill("NoSuchClass")
    form.get_by_label("Task").select_option("TABULAR_CLASSIFICATION")
    form.get_by_label("Dependencies").fill("scikit-learn==1.9.1")
    form.get_by_role("button", name="Upload").click()
    file_error = form.locator(".field", has=page.get_by_label("Template file")).get_by_role("alert")
    expect(file_error).to_contain_text("NoSuchClass")
    page.screenshot(path=artifacts / "03-model-upload-error.png", full_page=True)
    form.get_by_label("Class name").fill("SgdTabular")
    form.get_by_role("button", name="Upload").click()
    expect(page.get_by_role("table", name="model templates").get_by_role("cell", name="SgdTabular")).to_be_visible()
    expect(file_error).to_have_count(0)
    page.screenshot(path=artifacts / "04-models.png", full_page=True)

    # The create form: a bad budget comes back from the API beside its field.
    page.get_by_role("link", name="Train jobs").click()
    page.get_by_role("link", name="New train job").click()
    form = page.get_by_role("form", name="create a train job")
    form.get_by_label("App").fill("bc")
    form.get_by_label("Task").select_option("TABULAR_CLASSIFICATION")
    form.get_by_label("Train dataset").select_option(label="bc train (#1)")
    form.get_by_label("Validation dataset").select_option(label="bc val (#2)")
    form.get_by_label("sgd_tabular").check()
    form.get_by_label("MODEL_TRIAL_COUNT").fill(str(TRIALS))
    form.get_by_label("TIME_HOURS").fill("-1")
    form.get_by_label("Target column").fill("target")
    form.get_by_role("button", name="Create train job").click()
    time_error = form.locator(".field", has=page.get_by_label("TIME_HOURS")).get_by_role("alert")
    expect(time_error).to_contain_text("must be above 0")
    expect(form.get_by_label("TIME_HOURS")).to_have_attribute("aria-invalid", "true")
    page.screenshot(path=artifacts / "05-new-job-field-error.png", full_page=True)
    form.get_by_label("TIME_HOURS").fill("0.5")
    form.get_by_role("button", name="Create train job").click()

    # The job page, live until the job completes.
    expect(page).to_have_url(f"{url}/jobs/bc/1")
    job_page = page.get_by_test_id("job-page")
    expect(job_page).to_have_attribute("data-status", "COMPLETED", timeout=JOB_TIMEOUT_MS)
    trials = page.get_by_role("table", name="trials table")
    expect(trials.locator("tbody tr")).to_have_count(TRIALS)
    expect(page.get_by_role("progressbar", name="Trials")).to_have_attribute("aria-valuenow", "100")
    for chart in ("chart-best", "chart-scores", "chart-metrics", "chart-parallel"):
        expect(page.get_by_test_id(chart)).not_to_have_attribute("data-shown", "0")
        page.wait_for_function("(id) => document.querySelector(`[data-testid='${id}'] canvas`)?.width > 0", arg=chart)
        assert canvas_has_ink(page, chart), f"{chart} drew nothing"
    page.screenshot(path=artifacts / "06-job-page.png", full_page=True)

    # Where the time went: one stacked bar of the trials' phases, its legend in seconds and percent,
    # read again once the job ended (every trial counted).
    spent = page.get_by_role("region", name="time breakdown")
    expect(spent.get_by_test_id("time-total")).to_contain_text(f"over {TRIALS} trials")
    ran = ("wait", "fetch", "build", "train", "evaluate", "store")  # not a TorchModel: no warm start
    for phase in ran:
        item = spent.get_by_test_id(f"time-{phase}")
        expect(item).to_contain_text(re.compile(r"\d+(\.\d)?s \(\d+\.\d%\)"))
        assert float(item.get_attribute("data-seconds") or 0) > 0, phase
    expect(spent.get_by_test_id("time-profile")).to_have_attribute("data-seconds", "0")
    expect(spent.get_by_test_id("time-chart")).to_have_attribute("data-shown", str(len(ran)))
    page.wait_for_function("() => document.querySelector(`[data-testid='time-chart'] canvas`)?.width > 0")
    assert canvas_has_ink(page, "time-chart"), "the time breakdown drew nothing"
    spent.screenshot(path=artifacts / "06-job-time-breakdown.png")

    # The table sorts on the server: by number, the trials come 0..N-1.
    trials.get_by_role("button", name="#").click()
    expect(trials.locator("tbody tr td:nth-child(2)")).to_have_text([str(n) for n in range(TRIALS)])

    # The list shows the job with its budget used.
    page.get_by_role("navigation", name="main").get_by_role("link", name="Train jobs").click()
    row = page.get_by_role("table", name="train jobs").get_by_role("row", name="bc v1")
    expect(row).to_contain_text("COMPLETED")
    expect(row).to_contain_text(f"{TRIALS} / {TRIALS} trials")
    page.screenshot(path=artifacts / "07-train-jobs.png", full_page=True)
    row.get_by_role("link", name="bc v1").click()

    # A trial: knobs, metrics chart, logs.
    trials.get_by_role("link", name="0", exact=True).click()
    expect(page.get_by_test_id("trial-page")).to_be_visible()
    expect(page.get_by_role("table", name="knobs")).to_contain_text("alpha")
    expect(page.get_by_role("region", name="logs")).to_contain_text("epoch 0: train accuracy")
    expect(page.get_by_test_id("chart-trial-metrics")).not_to_have_attribute("data-shown", "0")
    with page.expect_download() as download:
        page.get_by_role("button", name="Download parameters").click()
    assert download.value.suggested_filename.endswith(".safetensors")
    assert Path(download.value.path()).stat().st_size > 0
    page.screenshot(path=artifacts / "08-trial-page.png", full_page=True)

    # Serve the best two, then predict in the playground.
    page.go_back()
    page.get_by_role("link", name="Serve the best").click()
    form = page.get_by_role("form", name="create an inference job")
    expect(form.get_by_label("Train job")).to_have_value("bc/1")
    form.get_by_label("k", exact=True).fill("2")
    form.get_by_label("Request log rate").fill("2")  # a share: the API's refusal shows beside the field
    form.get_by_role("button", name="Create inference job").click()
    rate_error = form.locator(".field", has=page.get_by_label("Request log rate")).get_by_role("alert")
    expect(rate_error).to_contain_text("between 0 and 1")
    form.get_by_label("Request log rate").fill("1")
    page.screenshot(path=artifacts / "09-inference-jobs.png", full_page=True)
    form.get_by_role("button", name="Create inference job").click()
    expect(page.get_by_test_id("api-key")).not_to_be_empty()
    expect(page.get_by_test_id("inference-page")).to_have_attribute("data-status", "RUNNING", timeout=JOB_TIMEOUT_MS)
    expect(page.get_by_test_id("endpoint")).to_contain_text("/predict")
    test = pd.read_csv(data / "test.csv")
    queries = test.drop(columns="target").head(3).to_numpy().tolist()
    playground = page.get_by_role("region", name="playground")
    playground.get_by_label("Queries (JSON)").fill("[[1, 2]]")  # the wrong number of features
    playground.get_by_role("button", name="Predict").click()
    queries_error = playground.locator(".field", has=page.get_by_label("Queries (JSON)")).get_by_role("alert")
    expect(queries_error).to_contain_text("queries[0]")
    playground.get_by_label("Queries (JSON)").fill(str(queries))
    playground.get_by_role("button", name="Predict").click()
    predictions = playground.get_by_label("predictions")
    expect(predictions.locator("tbody tr")).to_have_count(3)
    shown = predictions.locator("code.prediction").all_inner_texts()
    assert all(cell in ("0", "1") for cell in shown)
    page.screenshot(path=artifacts / "10-inference-playground.png", full_page=True)

    # Its serving over the last hour, from the predictor's counters (a point every 10 s), and its request log,
    # which holds the answered request (written within 10 s), not the refused one.
    for chart in ("chart-requests", "chart-latency", "chart-batch-size"):
        expect(page.get_by_test_id(chart)).not_to_have_attribute("data-shown", "0", timeout=SERVING_TIMEOUT_MS)
        page.wait_for_function("(id) => document.querySelector(`[data-testid='${id}'] canvas`)?.width > 0", arg=chart)
        assert canvas_has_ink(page, chart), f"{chart} drew nothing"
    logs = page.get_by_role("region", name="request logs")
    expect(logs.get_by_test_id("request-log-rate")).to_contain_text("logs 100% of the requests")
    download_button = logs.get_by_role("button", name="Download inference-")
    expect(download_button).to_have_count(1, timeout=SERVING_TIMEOUT_MS)
    page.screenshot(path=artifacts / "11-inference-serving.png", full_page=True)
    with page.expect_download() as download:
        download_button.click()
    assert re.fullmatch(r"inference-\d+-\d{4}-\d{2}-\d{2}\.jsonl", download.value.suggested_filename)
    [record] = [json.loads(line) for line in Path(download.value.path()).read_text().splitlines()]
    assert (record["queries"], record["predictions"]) == (queries, [json.loads(cell) for cell in shown])

    serve_versions_in_the_browser(page, platform, artifacts)

    # Users: an admin adds an APP_DEVELOPER, who cannot reach the users page.
    page.get_by_role("link", name="Users").click()
    form = page.get_by_role("form", name="create a user")
    form.get_by_label("Email").fill(DEVELOPER_EMAIL)
    form.get_by_label("Password").fill("short")
    form.get_by_role("button", name="Add user").click()
    expect(form.locator(".field", has=page.get_by_label("Password")).get_by_role("alert")).to_contain_text("at least 8")
    form.get_by_label("Password").fill(DEVELOPER_PASSWORD)
    form.get_by_label("Role").select_option("APP_DEVELOPER")
    form.get_by_role("button", name="Add user").click()
    expect(page.get_by_role("table", name="users").get_by_role("cell", name=DEVELOPER_EMAIL)).to_be_visible()
    page.screenshot(path=artifacts / "12-users.png", full_page=True)

    page.get_by_role("button", name="Sign out").click()
    sign_in(page, url, DEVELOPER_EMAIL, DEVELOPER_PASSWORD)
    expect(page.get_by_role("navigation", name="main").get_by_role("link", name="Users")).to_have_count(0)
    page.goto(f"{url}/models")
    expect(page.get_by_role("heading", name="Model templates")).to_be_visible()
    expect(page.get_by_role("form", name="upload a model template")).to_have_count(0)
    page.goto(f"{url}/users")
    expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
    expect(page.get_by_role("table", name="users")).to_have_count(0)
    page.screenshot(path=artifacts / "13-app-developer-no-users.png", full_page=True)


def test_a_space_trials_page_draws_the_architecture_it_trained(
    platform: LocalPlatform, page: Page, artifacts: Path, tmp_path: Path
) -> None:
    rng = np.random.default_rng(0)
    features = rng.normal(size=(60, 2))
    frame = pd.DataFrame({"a": features[:, 0], "b": features[:, 1], "target": (features[:, 0] > 0).astype(int)})
    data = write_tabular(tmp_path / "blobs.csv", frame)
    client = Client(platform.url)
    client.login(ADMIN_EMAIL, ADMIN_PASSWORD)
    dataset = client.create_dataset("blobs", data, format="TABULAR", target="target")
    model = client.create_model(SPACE_TEMPLATE, task="TABULAR_CLASSIFICATION", class_name="TinySpace")
    budget = {"MODEL_TRIAL_COUNT": 3, "TIME_HOURS": 0.5, "GPU_COUNT": 0}
    client.create_train_job("space", "TABULAR_CLASSIFICATION", train_dataset_id=dataset["id"],
                            val_dataset_id=dataset["id"], model_ids=[model["id"]], budget=budget,
                            target="target", seed=7)  # fmt: skip
    assert client.wait_for_train_job("space", timeout=JOB_TIMEOUT_MS / 1000, progress=False)["status"] == "COMPLETED"
    records = {trial["id"]: client.get_trial_architecture(trial["id"]) for trial in client.iter_trials("space")}
    trial_id, record = max(records.items(), key=lambda item: sum(node["changed"] for node in item[1]["nodes"]))
    changed = [node["name"] for node in record["nodes"] if node["changed"]]
    assert changed, "the job's seed proposed only the base: pick one that explores"

    sign_in(page, platform.url, ADMIN_EMAIL, ADMIN_PASSWORD)
    page.goto(f"{platform.url}/jobs/space/1/trials/{trial_id}")
    expect(page.get_by_test_id("trial-page")).to_be_visible()
    summary = page.get_by_test_id("architecture-summary")
    expect(summary).to_contain_text(f"{len(changed)} of {len(record['nodes'])} nodes changed from the base")
    for name in changed:
        expect(summary).to_contain_text(name)
    chart = "chart-architecture"
    expect(page.get_by_test_id(chart)).to_have_attribute("data-shown", str(len(record["nodes"])))
    page.wait_for_function("(id) => document.querySelector(`[data-testid='${id}'] canvas`)?.width > 0", arg=chart)
    assert canvas_has_ink(page, chart), "the architecture drew nothing"
    page.screenshot(path=artifacts / "13-trial-architecture.png", full_page=True)


def test_the_new_job_forms_controls_set_policies_and_early_stopping(
    platform: LocalPlatform, page: Page, artifacts: Path, tmp_path: Path
) -> None:
    rng = np.random.default_rng(0)
    features = rng.normal(size=(60, 2))
    frame = pd.DataFrame({"a": features[:, 0], "b": features[:, 1], "target": (features[:, 0] > 0).astype(int)})
    client = Client(platform.url)
    client.login(ADMIN_EMAIL, ADMIN_PASSWORD)
    client.create_dataset("blobs", write_tabular(tmp_path / "blobs.csv", frame), format="TABULAR", target="target")
    client.create_model(TEMPLATE, task="TABULAR_CLASSIFICATION", class_name="SgdTabular")

    sign_in(page, platform.url, ADMIN_EMAIL, ADMIN_PASSWORD)
    page.get_by_role("link", name="New train job").click()
    form = page.get_by_role("form", name="create a train job")
    form.get_by_label("App").fill("opts")
    form.get_by_label("Task").select_option("TABULAR_CLASSIFICATION")
    form.get_by_label("Train dataset").select_option(label="blobs (#1)")
    form.get_by_label("Validation dataset").select_option(label="blobs (#1)")
    form.get_by_label("sgd_tabular").check()
    form.get_by_label("MODEL_TRIAL_COUNT").fill("3")
    form.get_by_label("TIME_HOURS").fill("0.5")
    form.get_by_label("Target column").fill("target")
    form.get_by_role("checkbox", name="EARLY_STOP").check()
    expect(form.get_by_label("Rule").locator("option")).to_have_text(list(STOPPING_RULES))
    form.get_by_label("Rule").select_option("asha")
    form.get_by_label("eta").fill("2")
    page.screenshot(path=artifacts / "14-new-job-options.png", full_page=True)
    form.get_by_role("button", name="Create train job").click()

    expect(page).to_have_url(f"{platform.url}/jobs/opts/1")
    shown = page.get_by_text("· options ")
    expect(shown).to_contain_text("EARLY_STOP")
    # train() gets only its own arguments (none here): the target column is the job's, the choices its options.
    text = shown.inner_text()
    assert "· target target" in text and "train args" not in text
    options = json.loads(text.split(" · options ", 1)[1])
    assert options["policies"]["EARLY_STOP"] is True and options["policies"]["DOWNSCALE"] is False
    assert options["early_stopping"] == {"rule": "asha", "eta": 2}
    expect(page.get_by_test_id("job-page")).to_have_attribute("data-status", "COMPLETED", timeout=JOB_TIMEOUT_MS)


def test_the_job_page_shows_how_many_trials_share_a_gpu_and_why(
    platform: LocalPlatform, page: Page, artifacts: Path, tmp_path: Path
) -> None:
    # No GPU here: what a GPU job's driver would have decided is written where it writes it, and the page shows it.
    frame = pd.DataFrame({"a": np.arange(40.0), "target": np.arange(40) % 2})
    client = Client(platform.url)
    client.login(ADMIN_EMAIL, ADMIN_PASSWORD)
    data = client.create_dataset("tiny", write_tabular(tmp_path / "tiny.csv", frame), format="TABULAR", target="target")
    model = client.create_model(TEMPLATE, task="TABULAR_CLASSIFICATION", class_name="SgdTabular")
    job = client.create_train_job(
        "shared", "TABULAR_CLASSIFICATION", train_dataset_id=data["id"], val_dataset_id=data["id"],
        model_ids=[model["id"]], budget={"MODEL_TRIAL_COUNT": 1},
    )  # fmt: skip
    record = {
        "level": 2, "settled": True, "peak_mb": 1508, "device_mb": 143155, "retried_alone": [7],
        "changes": [
            {"level": 2, "reason": "one per GPU measured"},
            {"level": 4, "reason": "2 per GPU ran 1.60x as fast as 1"},
            {"level": 2, "reason": "trial 7 ran out of GPU memory at 4 per GPU"},
        ],
    }  # fmt: skip
    engine = create_engine_from_url(f"sqlite:///{platform.home / 'baobab.db'}")
    try:
        with session_scope(engine) as session:
            assert record_train_job_gpu_share(session, job["id"], record)
    finally:
        engine.dispose()

    sign_in(page, platform.url, ADMIN_EMAIL, ADMIN_PASSWORD)
    page.goto(f"{platform.url}/jobs/shared/1")
    shared = page.get_by_role("region", name="GPU sharing")
    expect(shared.get_by_test_id("gpu-share-level")).to_have_text(
        "2 trials per GPU (settled); the largest trial needed 1,508 MiB of 143,155 MiB."
    )
    change = shared.get_by_test_id("gpu-share-change-2")
    expect(change).to_have_text("2 per GPU: trial 7 ran out of GPU memory at 4 per GPU")
    expect(shared.get_by_test_id("gpu-share-retried")).to_contain_text("ran again alone: trial 7.")
    shared.screenshot(path=artifacts / "15-job-gpu-sharing.png")
