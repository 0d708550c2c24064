"""Serving: Baobab's predictor against Ray Serve, on the same trained models, the same queries, the same machine.

One scikit-learn model (``examples/models/sklearn_images.py``: PCA + k-NN) and one CNN
(``examples/models/torch_cnn.py`` at its largest: 32-64-128 channels, 5x5 kernels) are trained by
a real platform (``baobab up`` on its embedded default) on a Fashion-MNIST subset, one trial each.
Each is then served three ways:

1. **direct**: ``model.predict([query])`` in this process (no serving at all), the floor;
2. **Baobab**: an inference job of that one trial, through its predictor's ``POST /predict``;
3. **Ray Serve** (PyPI ``ray[serve]``): a deployment that loads the same template, knobs and
   parameters and answers the same JSON body, batched by ``@serve.batch``.

Both servers batch with the predictor's defaults (at most 64 queries; an idle server sends what
it holds at once, and a busy one's next batch fills while it works), run the model with one torch
thread (as Baobab's inference workers do), and get one model process. Ray's
``max_ongoing_requests`` is raised to 64 so that its batches can fill (its default of 5 would cap
them). The load comes from ``wrk`` (C, one query a request, the bodies rotating over test images),
at 1, 8 and 32 connections, one server at a time (the other stopped). Then the CNN's predictor
once more with ``--max-batch-size=1``: what micro-batching is worth.

What the setup favours: client and servers share this machine's cores, so at 32 clients the
client takes CPU from the server (the same for both); the models are small, so per-request
overhead dominates, which is what this measures. Ray runs its controller, proxy and replica as
processes of their own, which a machine of few cores feels more than a large one.

    make bench-serving                                   # installs ray[serve] (the bench-serving extra)
    python bench/serving.py --smoke --out /tmp/serving   # short runs: checks the script
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from setup_record import RunSetup, setup_markdown

from baobab.model import knobs_from_json, load_template
from baobab.predictor import PredictorOptions
from baobab.sdk import Client
from baobab.store import build_fashion_mnist, params_from_bytes, read_image_files
from baobab.testing import LocalPlatform

ROOT = Path(__file__).resolve().parent.parent
#: What the setup favours, in every result's setup record (and beside a result from before it had one).
FAVOURS = (
    "the predictor: Ray Serve runs a controller, an HTTP proxy and a replica beside Ray's own GCS and raylet, all "
    "on these cores, so a small machine costs it more than it costs the predictor (one process and one worker "
    "process); on a large machine the gap would be smaller. The models are small, so the per-request path "
    "(HTTP, JSON, the hop to the model's process) dominates: that is what this measures, and why "
    "micro-batching, which saves only model calls, gains little here. The client shares the cores with the "
    "server, the same for both"
)
EMAIL, PASSWORD = "bench@example.com", "bench-password"
MODELS = {
    "scikit-learn PCA + k-NN": ("examples/models/sklearn_images.py", "SkImageClassifier"),
    "CNN (torch)": ("examples/models/torch_cnn.py", "TorchCnn"),
}
#: The CNN at the largest structure its knobs allow (a fixed model to serve, not a sampled one): the
#: example file with a subclass whose structural knobs are fixed.
_FIXED_CNN = """

class ServingCnn(TorchCnn):
    @staticmethod
    def get_knob_config():
        from baobab.model import FixedKnob

        config = TorchCnn.get_knob_config()
        config.update(channels=FixedKnob(32), depth=FixedKnob(3), kernel_size=FixedKnob(5), epochs=FixedKnob(2))
        return config
"""
#: The predictor's batching defaults, given to Ray too.
MAX_BATCH, BATCH_WAIT_S = PredictorOptions().max_batch_size, PredictorOptions().batch_window_s
QUERY_BODIES = 200


def load_model(template: Path, class_name: str, knobs: Any, params: bytes) -> Any:
    """The trial's model as an inference worker loads it (template, knobs, parameters; one torch thread)."""
    cls = load_template(template, class_name)
    model = cls(**(knobs_from_json(knobs) if isinstance(knobs, str) else knobs))
    model.load_parameters(params_from_bytes(params))
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    return model


# -- the load generator --------------------------------------------------------------------------

_WRK_SCRIPT = """
local bodies = {%s}
local i = 0
request = function()
  i = i %% #bodies + 1
  return wrk.format("POST", nil, {["Content-Type"] = "application/json"}, bodies[i])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('RESULT {"requests": %%d, "duration_us": %%d, "p50_us": %%d, "p99_us": %%d, ' ..
    '"errors": %%d, "non_2xx": %%d}\\n', summary.requests, summary.duration, latency:percentile(50),
    latency:percentile(99), e.connect + e.read + e.write + e.timeout, e.status))
end
"""


def wrk(url: str, bodies: list[str], connections: int, seconds: float, script_dir: Path) -> dict[str, float]:
    """Requests per second and p50/p99 latency (ms) of ``connections`` clients for ``seconds``."""
    script = script_dir / "load.lua"
    script.write_text(_WRK_SCRIPT % ",\n".join(f"[==[{b}]==]" for b in bodies))
    command = ["wrk", f"-t{min(2, connections)}", f"-c{connections}", f"-d{seconds:g}s", "--timeout", "30s"]
    out = subprocess.run([*command, "-s", str(script), url], capture_output=True, text=True, check=True).stdout
    line = next(line for line in out.splitlines() if line.startswith("RESULT "))
    r = json.loads(line.removeprefix("RESULT "))
    if r["errors"] or r["non_2xx"]:
        raise RuntimeError(f"{url}: {r['errors']} socket errors and {r['non_2xx']} non-2xx answers under load")
    return {
        "rps": r["requests"] / (r["duration_us"] / 1e6),
        "p50_ms": r["p50_us"] / 1000,
        "p99_ms": r["p99_us"] / 1000,
    }


def load_levels(url: str, bodies: list[str], clients: list[int], seconds: float, tmp: Path) -> dict[str, Any]:
    wrk(url, bodies, max(clients), min(2.0, seconds), tmp)  # warm: first batches, lazy imports
    return {str(c): wrk(url, bodies, c, seconds, tmp) for c in clients}


# -- the three ways ------------------------------------------------------------------------------


def direct(model: Any, queries: list[Any], repeats: int) -> dict[str, float]:
    """The model called in this process, one query at a time: the floor every server adds to."""
    for q in queries[:10]:
        model.predict([q])
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        model.predict([queries[i % len(queries)]])
        times.append(time.perf_counter() - start)
    times.sort()
    return {"p50_ms": statistics.median(times) * 1000, "p99_ms": times[int(len(times) * 0.99)] * 1000}


def start_predictor(environ: dict[str, str], job_id: int, *options: str) -> tuple[subprocess.Popen[str], str]:
    """A second predictor process for inference job ``job_id`` (another batching setting), and its URL."""
    command = [sys.executable, "-m", "baobab.predictor", str(job_id), *options]
    process = subprocess.Popen(command, env=environ, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise RuntimeError(f"the predictor of inference job {job_id} ({' '.join(options)}) did not start")
    return process, json.loads(line)["url"]


def ray_serve(template: Path, class_name: str, knobs: Any, params: bytes) -> str:
    """Ray Serve serving the same model; returns the URL. ``serve.shutdown()`` and ``ray.shutdown()`` end it."""
    import ray
    from ray import serve

    @serve.deployment(max_ongoing_requests=MAX_BATCH, ray_actor_options={"num_cpus": 1})
    class Model:
        def __init__(self) -> None:
            self.model = load_model(template, class_name, knobs, params)

        @serve.batch(max_batch_size=MAX_BATCH, batch_wait_timeout_s=BATCH_WAIT_S)
        async def predict(self, queries: list[Any]) -> list[Any]:
            return self.model.predict(queries)

        async def __call__(self, request: Any) -> dict[str, Any]:
            body = await request.json()
            return {"predictions": [await self.predict(q) for q in body["queries"]]}

    port = _free_port()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": _ray_env()})
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(Model.bind(), route_prefix="/predict")
    return f"http://127.0.0.1:{port}/predict"


def _ray_env() -> dict[str, str]:
    # The replica imports the template and baobab from this checkout, with one thread per library.
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- the run -------------------------------------------------------------------------------------


def train(client: Client, data: Path, trials_minutes: float) -> dict[str, dict[str, Any]]:
    """One trained trial of each model, through the platform: its knobs, parameters and inference job."""
    train_ds = client.create_dataset("fashion train", data / "train.zip", format="IMAGE_FILES")
    val_ds = client.create_dataset("fashion val", data / "val.zip", format="IMAGE_FILES")
    out = {}
    for i, (name, (path, class_name)) in enumerate(MODELS.items()):
        template = ROOT / path
        if class_name == "TorchCnn":
            template, class_name = data.parent / "serving_cnn.py", "ServingCnn"
            template.write_text((ROOT / path).read_text() + _FIXED_CNN)
        model = client.create_model(template, task="IMAGE_CLASSIFICATION", class_name=class_name)
        app = f"serving-{i}"
        budget = {"MODEL_TRIAL_COUNT": 1, "TIME_HOURS": trials_minutes / 60, "GPU_COUNT": 0}
        job = client.create_train_job(
            app,
            "IMAGE_CLASSIFICATION",
            train_dataset_id=train_ds["id"],
            val_dataset_id=val_ds["id"],
            model_ids=[model["id"]],
            budget=budget,
        )
        client.wait_for_train_job(app, job["app_version"])
        (trial,) = client.get_best_trials(app, job["app_version"], k=1)
        with tempfile.TemporaryDirectory() as tmp:
            params = client.download_trial_params(trial["id"], Path(tmp) / "params").read_bytes()
        inference = client.create_inference_job(app, job["app_version"], k=1, public=True, wait=True)
        out[name] = {
            "template": template,
            "class_name": class_name,
            "knobs": trial["knobs"],
            "params": params,
            "inference": inference,
        }
        print(f"{name}: trial {trial['id']} score {trial['score']:.3f}, served at {inference['predictor_url']}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--seconds", type=float, default=10.0, help="each load level's duration")
    parser.add_argument("--images", type=int, default=3000, help="train + validation images")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--smoke", action="store_true", help="short runs, to check the script")
    parser.add_argument("--markdown", type=Path, help="only write the Markdown of this results JSON again")
    args = parser.parse_args()
    if args.markdown is not None:
        args.markdown.with_suffix(".md").write_text(markdown(json.loads(args.markdown.read_text())))
        return
    if args.smoke:
        args.seconds, args.images, args.clients = 2.0, 600, [1, 8]
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (Debian's package wrk): it generates the load")
    args.out.mkdir(parents=True, exist_ok=True)
    setup = RunSetup(
        FAVOURS,
        placement="not applicable (one trial of each model is trained first; serving is measured)",
        fusion="off (one model a predictor)",
        warm_start="not applicable (serving is measured)",
    )
    work = Path(tempfile.mkdtemp(prefix="baobab-serving-"))
    data = work / "fashion-mnist"
    build_fashion_mnist(data, limit=args.images, seed=0)
    test = read_image_files(data / "test.zip")
    queries = [image.tolist() for image in test.images[:QUERY_BODIES]]
    bodies = [json.dumps({"queries": [q]}) for q in queries]
    results: dict[str, Any] = {"models": {}}
    settings = {"BAOBAB_ADMIN_EMAIL": EMAIL, "BAOBAB_ADMIN_PASSWORD": PASSWORD}
    started = time.time()
    with LocalPlatform(work / "home", workers=2, settings=settings) as baobab_up:
        client = Client(baobab_up.url)
        client.login(EMAIL, PASSWORD)
        trained = train(client, data, trials_minutes=3.0)
        for name, t in trained.items():
            model = load_model(t["template"], t["class_name"], t["knobs"], t["params"])
            row: dict[str, Any] = {"direct": direct(model, queries, 200 if args.smoke else 2000)}
            del model
            url = t["inference"]["predictor_url"] + "/predict"
            row["baobab"] = load_levels(url, bodies, args.clients, args.seconds, work)
            if name.startswith("CNN"):
                job_id = t["inference"]["id"]
                process, one_url = start_predictor(baobab_up.environ, job_id, "--max-batch-size=1")
                try:
                    top = [max(args.clients)]
                    row["baobab batch 1"] = load_levels(f"{one_url}/predict", bodies, top, args.seconds, work)
                finally:
                    process.terminate()
                    process.wait()
            client.stop_inference_job(t["inference"]["id"])  # its predictor stops: Ray gets the cores alone
            results["models"][name] = row
        # Ray Serve after the platform stopped, one model at a time.
    import ray
    from ray import serve

    for name, t in trained.items():
        url = ray_serve(t["template"], t["class_name"], t["knobs"], t["params"])
        try:
            results["models"][name]["ray serve"] = load_levels(url, bodies, args.clients, args.seconds, work)
        finally:
            serve.shutdown()
            ray.shutdown()
    shutil.rmtree(work, ignore_errors=True)
    results.update(
        date=datetime.date.today().isoformat(),
        minutes=round((time.time() - started) / 60, 1),
        seconds=args.seconds,
        clients=args.clients,
        machine=f"{platform.machine()}, {os.cpu_count()} cores",
        ray=ray.__version__,
        smoke=args.smoke,
        setup=setup.finish(),
    )
    stem = "serving-smoke" if args.smoke else "serving"
    (args.out / f"{stem}.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / f"{stem}.md").write_text(markdown(results))
    print(markdown(results))


def markdown(r: dict[str, Any]) -> str:
    top, one = str(max(r["clients"])), str(min(r["clients"]))
    lines = [
        "# Serving: Baobab's predictor against Ray Serve",
        "",
        f"{r['date']}, {r['machine']}, Ray {r['ray']}, {r['seconds']:g} s a load level"
        f"{' (smoke run)' if r['smoke'] else ''}; written by `bench/serving.py` ({r['minutes']} min).",
        f"One query a request, from `wrk`; both servers batch up to {MAX_BATCH} queries (an idle server waits",
        f"{BATCH_WAIT_S * 1000:g} ms for more), one model process, one torch thread. The client shares the machine's",
        "cores with the server.",
        "",
        "| model | way | clients | requests/s | p50 ms | p99 ms |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, row in r["models"].items():
        d = row["direct"]
        lines.append(f"| {name} | direct call | 1 | {1000 / d['p50_ms']:.0f} | {d['p50_ms']:.2f} | {d['p99_ms']:.2f} |")
        for way in ("baobab", "ray serve", "baobab batch 1"):
            for clients, m in row.get(way, {}).items():
                lines.append(f"| {name} | {way} | {clients} | {m['rps']:.0f} | {m['p50_ms']:.2f} | {m['p99_ms']:.2f} |")
    lines += ["", "## Against the aims", ""]
    for name, row in r["models"].items():
        b, ray_ = row["baobab"], row["ray serve"]
        overhead = b[one]["p50_ms"] - row["direct"]["p50_ms"]
        lines.append(
            f"- {name}: p50 overhead over a direct call at {one} client {overhead:.2f} ms (aim ≤ 2 ms); "
            f"throughput at {top} clients {b[top]['rps'] / ray_[top]['rps']:.2f}x Ray Serve's; "
            f"p50 at {one} client {b[one]['p50_ms'] / ray_[one]['p50_ms']:.2f}x Ray Serve's (lower is better)."
        )
        if "baobab batch 1" in row:
            ratio = b[top]["rps"] / row["baobab batch 1"][top]["rps"]
            lines.append(
                f"- {name}: micro-batching gives {ratio:.2f}x the throughput of batch size 1 at {top} clients "
                "(aim ≥ 5x)."
            )
    # A result from before bench/setup_record.py (``--markdown`` of an old JSON) has no record.
    lines += ["", setup_markdown(r["setup"]) if "setup" in r else f"What the setup favours: {FAVOURS}."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
