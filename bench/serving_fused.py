"""Fused ensemble against fan-out against one member: throughput through the predictor's HTTP endpoint.

``baobab up`` (SQLite, local workers) trains five trials of one small CNN on a
Fashion-MNIST subset (Debian's ``dataset-fashion-mnist``, through
``baobab.store.build_fashion_mnist``): ``examples/models/torch_cnn.py`` with its structure
fixed (two conv-BatchNorm-ReLU-pool blocks of 8 and 16 channels, 3x3), so the trials
differ only in learning rate, dropout and seed. Two inference jobs are created through the
SDK, the best five trials and the best one, and the platform is stopped. Then three
predictors (``python -m baobab.predictor``, the process the platform runs) serve them in
turn, with the same options, one at a time on the quiet machine:

- **fused**: the five-member job as the predictor serves it by default: one worker
  process answers for the five in one stacked forward pass (``torch.func`` over stacked
  parameters), ensembled by averaging;
- **fan-out**: the same job with ``--no-fuse``: five worker processes, one per member,
  each answering every batch, ensembled the same way;
- **single**: the one-member job;
- **single, autoscaled**: the one-member job with ``BAOBAB_PREDICTOR_MAX_REPLICAS`` (``--max-replicas``,
  by default the cores, at most 4): the predictor adds worker replicas while the load stays above
  its target (:mod:`baobab.predictor._scaling`, here after 1 s instead of 2), and the window is
  measured after a longer warm-up (8 s), once they serve; the replicas serving at the end of each
  window are reported;
- **large CNN on the CPU**, one replica and autoscaled: one trial of a larger CNN (32-64-128
  channels, 5x5 kernels, as ``bench/serving.py`` serves), whose arithmetic is most of what serving
  an image costs, on the CPU cores (``CUDA_VISIBLE_DEVICES`` empty where there is a GPU).

Each is measured under the same loads, HTTP clients in threads of this process on
keep-alive connections, posting request bodies encoded once beforehand (so the clients
cost little): one client sending 32 images a request (each batch a member sees holds 32
images, and nothing overlaps) and 8 clients sending 8 images each (the predictor's
micro-batcher joins them into batches of up to 64 while the previous batch is computed).
Throughput is images answered per second over a timed window after a warm-up, and the
CPU time of the predictor and its workers over that window per image answered (what a
busy machine bounds throughput by); the ways take turns, and each load is repeated, the
medians reported. Every answer is checked: no member left out, and the fused and fan-out
ensembles' probabilities agree.

    .venv/bin/python bench/serving_fused.py           # about 7 minutes on 2 shared cores
    .venv/bin/python bench/serving_fused.py --quick   # one repeat, shorter windows: about 3 minutes
    python bench/serving_fused.py --markdown bench/results/serving_fused.json    # only the report again

On a machine with CUDA the members answer on the GPU, and the results go to ``serving_fused_gpu.*``.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from setup_record import RunSetup, setup_markdown

from baobab.model import load_template
from baobab.sdk import Client
from baobab.store import build_fashion_mnist, params_from_bytes, read_image_files
from baobab.testing import LocalPlatform

HERE = Path(__file__).parent
RESULTS = HERE / "results"
TEMPLATE = HERE.parent / "examples" / "models" / "torch_cnn.py"
EMAIL, PASSWORD = "bench@example.com", "bench-password-1"
MEMBERS = 5
#: Appended to torch_cnn.py in the uploaded file: one structure, values left to the search.
FIXED_STRUCTURE = """

from baobab.model import FixedKnob


class ServingCnn(TorchCnn):
    @staticmethod
    def get_knob_config():
        return {
            "learning_rate": FloatKnob(1e-3, 1e-2, is_exp=True),
            "dropout": FloatKnob(0.0, 0.3),
            "channels": FixedKnob(8),
            "depth": FixedKnob(2),
            "kernel_size": FixedKnob(3),
            "epochs": FixedKnob(1),
            "batch_size": FixedKnob(64),
        }


class LargeServingCnn(TorchCnn):
    @staticmethod
    def get_knob_config():
        config = TorchCnn.get_knob_config()
        config.update(channels=FixedKnob(32), depth=FixedKnob(3), kernel_size=FixedKnob(5), epochs=FixedKnob(1))
        return config
"""


@dataclass(frozen=True)
class Load:
    """Concurrent clients, each posting requests of ``images`` queries, one after the other."""

    clients: int
    images: int

    @property
    def name(self) -> str:
        return f"{self.clients} client{'s' if self.clients > 1 else ''} x {self.images} images"


LOADS = (Load(1, 32), Load(8, 8))


@dataclass
class Way:
    """One way of serving, and what it measured under each load (images per second, one per repeat)."""

    name: str
    job: str
    options: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)  # more BAOBAB_* settings of its predictor
    warmup_s: float = 0.0  # at least this warm-up before each window
    processes: int = 0
    replicas: dict[str, list[int]] = field(default_factory=dict)  # serving at the end of each window
    rates: dict[str, list[float]] = field(default_factory=dict)
    p50_ms: dict[str, list[float]] = field(default_factory=dict)
    cpu_ms: dict[str, list[float]] = field(default_factory=dict)  # CPU ms of the predictor and its workers per image


@contextmanager
def predictor(
    home: Path, job_id: int, options: tuple[str, ...], settings: dict[str, str]
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``python -m baobab.predictor`` on the platform's home, with more ``settings``; yields its URL and process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BAOBAB_")}
    env.update(settings, BAOBAB_HOME=str(home))
    log = (home / "logs" / f"bench-predictor-{job_id}.log").open("ab")
    command = [sys.executable, "-m", "baobab.predictor", str(job_id), "--exit-with-parent", *options]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            raise SystemExit(f"the predictor of job {job_id} did not start; see {log.name}")
        yield json.loads(line)["url"], process
    finally:
        process.terminate()
        process.wait(30)
        log.close()


def workers(pid: int) -> list[int]:
    """The processes ``pid`` started (a predictor's inference workers)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def cpu_s(pids: list[int]) -> float:
    """The CPU seconds (user and system) ``pids`` have used."""
    total = 0.0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


@dataclass(frozen=True)
class Measured:
    rate: float  # images answered per second
    p50_ms: float  # median request latency
    cpu_ms: float  # CPU milliseconds of the predictor and its workers per image answered


def measure(url: str, pid: int, bodies: list[bytes], clients: int, seconds: float, warmup_s: float) -> Measured:
    """Throughput, latency and CPU cost (of predictor ``pid`` and the workers it runs once warm) over ``seconds``
    after ``warmup_s`` of ``clients`` posting ``bodies``."""
    address = urlsplit(url)
    images_per_request = len(json.loads(bodies[0])["queries"])
    start = time.perf_counter() + warmup_s
    end = start + seconds
    counts = [0] * clients
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[str] = []

    def client(i: int) -> None:
        connection = http.client.HTTPConnection(address.hostname, address.port, timeout=60)
        n = i
        while (now := time.perf_counter()) < end:
            body = bodies[n % len(bodies)]
            n += clients
            connection.request("POST", "/predict", body=body, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            data = response.read()
            done = time.perf_counter()
            answer = json.loads(data)
            if response.status != 200 or answer["members"]["left_out"]:
                errors.append(data.decode()[:300])
                return
            if now >= start and done <= end:
                counts[i] += images_per_request
                latencies[i].append((done - now) * 1000)
        connection.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    time.sleep(max(0.0, start - time.perf_counter()))
    pids = [pid, *workers(pid)]
    cpu_start = cpu_s(pids)
    time.sleep(max(0.0, end - time.perf_counter()))
    cpu_end = cpu_s(pids)
    for thread in threads:
        thread.join()
    if errors:
        raise SystemExit(f"{url}: a request failed: {errors[0]}")
    images = sum(counts)
    return Measured(
        images / seconds, statistics.median(x for lat in latencies for x in lat), (cpu_end - cpu_start) * 1000 / images
    )


def replicas(url: str) -> int:
    """The worker replicas serving the predictor's one version now."""
    with urllib.request.urlopen(f"{url}/health", timeout=10) as response:
        return int(json.load(response)["versions"][0]["replicas"])


def answers(url: str, body: bytes) -> list[list[float]]:
    address = urlsplit(url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=60)
    connection.request("POST", "/predict", body=body, headers={"Content-Type": "application/json"})
    answer = json.loads(connection.getresponse().read())
    connection.close()
    return answer["predictions"]


@dataclass(frozen=True)
class Trained:
    ensemble: int  # the five-member inference job
    single: int  # the one-member inference job
    large: int  # one trial of a larger CNN (32-64-128 channels, 5x5), for autoscaling
    models: list[Any]  # the five members, best first, loaded here from their stored parameters
    images: list[list[list[int]]]  # test images


def in_process_ms(trained: Trained, repeats: int = 30) -> dict[str, float]:
    """Median milliseconds, in this process on one torch thread, to answer 32 test images: one member's
    ``predict``, the five members' one after another, and the five stacked (``StackedPredictor``)."""
    import torch

    from baobab.model import StackedPredictor

    torch.set_num_threads(1)
    queries = trained.images[:32]

    def timed(call: Any) -> float:
        call()
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            call()
            times.append((time.perf_counter() - started) * 1000)
        return statistics.median(times)

    models = trained.models
    costs = {
        "one member": timed(lambda: models[0].predict(queries)),
        "five members in turn": timed(lambda: [m.predict(queries) for m in models]),
    }
    stack = StackedPredictor(models)  # folds each member's BatchNorm: timed after the unfolded ones
    costs["five members stacked"] = timed(lambda: stack.predict(queries))
    return costs


def train(home: Path, folder: Path, limit: int) -> Trained:
    """Train the five trials and serve them as two inference jobs (not started here)."""
    built = build_fashion_mnist(folder / "images", limit=limit, val_fraction=0.1, seed=0)
    files = {split.name: split.path for split in built.splits}
    template = folder / "serving_cnn.py"
    template.write_text(TEMPLATE.read_text() + FIXED_STRUCTURE)
    settings = {"BAOBAB_ADMIN_EMAIL": EMAIL, "BAOBAB_ADMIN_PASSWORD": PASSWORD, "BAOBAB_CPU_SLOTS": "2"}
    with LocalPlatform(home, workers=2, settings=settings) as local:
        client = Client(local.url)
        client.login(EMAIL, PASSWORD)
        train_set = client.create_dataset("fm train", files["train"], format="IMAGE_FILES")
        val_set = client.create_dataset("fm val", files["val"], format="IMAGE_FILES")

        def trained(app: str, class_name: str, trials: int) -> None:
            model = client.create_model(template, task="IMAGE_CLASSIFICATION", class_name=class_name)
            client.create_train_job(
                app,
                "IMAGE_CLASSIFICATION",
                train_dataset_id=train_set["id"],
                val_dataset_id=val_set["id"],
                model_ids=[model["id"]],
                budget={"MODEL_TRIAL_COUNT": trials, "GPU_COUNT": 0},
                options={"warm_start": False, "fusion": "off"},
                strategy="random",
                seed=0,
            )
            job = client.wait_for_train_job(app, timeout=1800, progress=False)
            if job["trial_counts"].get("COMPLETED") != trials:
                raise SystemExit(f"{app}: not every trial completed: {job['trial_counts']}")

        trained("serving-fused", "ServingCnn", MEMBERS)
        ensemble = client.create_inference_job("serving-fused", k=MEMBERS, public=True)
        single = client.create_inference_job("serving-fused", k=1, public=True)
        trained("serving-large", "LargeServingCnn", 1)
        large = client.create_inference_job("serving-large", k=1, public=True)
        cls = load_template(template, "ServingCnn")
        models = []
        for member in ensemble["members"]:
            model = cls(**client.get_trial(member["trial_id"])["knobs"])
            model.load_parameters(
                params_from_bytes(client.download_trial_params(member["trial_id"], folder).read_bytes())
            )
            models.append(model)
    test = read_image_files(files["test"])
    return Trained(ensemble["id"], single["id"], large["id"], models, test.images.astype(int).tolist())


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    load_average = os.getloadavg()[0]
    on_gpu = _gpu_name() is not None
    record = RunSetup(
        "fused: the stacked pass is cheap on the GPU, so the CPU work of five answers is the bound"
        if on_gpu
        else "fused over fan-out: the fan-out's costs are per process, and on these cores its five workers "
        "cannot compute in parallel",
        placement="not applicable (the trials are trained first; serving is measured)",
        fusion="per way: fused (the predictor's default), fan-out (--no-fuse), single (one member)",
        warm_start="not applicable (serving is measured)",
    )
    with tempfile.TemporaryDirectory(prefix="bench-serving-fused-") as tmp:
        folder = Path(tmp)
        home = folder / "home"
        trained = train(home, folder, args.limit)
        trained_s = time.perf_counter() - started
        costs = in_process_ms(trained)
        print("in process, 32 images: " + ", ".join(f"{what} {ms:.1f} ms" for what, ms in costs.items()))
        images = trained.images
        ways = [
            Way("fused", "ensemble", ()),
            Way("fan-out", "ensemble", ("--no-fuse",)),
            Way("single", "single", ()),
            Way(
                "single, autoscaled",
                "single",
                ("--scale-up-after-s=1",),
                {"BAOBAB_PREDICTOR_MAX_REPLICAS": str(args.max_replicas)},
                warmup_s=8.0,
            ),
        ]
        # A model whose arithmetic is most of what serving costs, on the CPU cores (the GPU hidden): one
        # replica against as many as the autoscaler starts.
        on_cpu = {"CUDA_VISIBLE_DEVICES": ""}
        ways += [
            Way("large CNN on the CPU", "large", (), on_cpu),
            Way(
                "large CNN on the CPU, autoscaled",
                "large",
                ("--scale-up-after-s=1",),
                {**on_cpu, "BAOBAB_PREDICTOR_MAX_REPLICAS": str(args.max_replicas)},
                warmup_s=8.0,
            ),
        ]
        jobs = {"ensemble": trained.ensemble, "single": trained.single, "large": trained.large}
        check = json.dumps({"queries": images[:32]}).encode()
        agreement: dict[str, list[list[float]]] = {}
        for repeat in range(args.repeats):
            for way in ways:
                with predictor(home, jobs[way.job], way.options, way.env) as (url, process):
                    way.processes = len(workers(process.pid))
                    if repeat == 0:
                        agreement[way.name] = answers(url, check)
                    for load in LOADS:
                        bodies = [
                            json.dumps({"queries": images[i : i + load.images]}).encode()
                            for i in range(0, len(images) - load.images + 1, load.images)
                        ]
                        warmup = max(args.warmup, way.warmup_s)
                        measured = measure(url, process.pid, bodies, load.clients, args.seconds, warmup)
                        way.replicas.setdefault(load.name, []).append(replicas(url))
                        way.rates.setdefault(load.name, []).append(measured.rate)
                        way.p50_ms.setdefault(load.name, []).append(measured.p50_ms)
                        way.cpu_ms.setdefault(load.name, []).append(measured.cpu_ms)
                        print(
                            f"repeat {repeat + 1} {way.name:8} {load.name:20} {measured.rate:8.1f} images/s  "
                            f"p50 {measured.p50_ms:.1f} ms  {measured.cpu_ms:.2f} CPU ms/image  "
                            f"load average {os.getloadavg()[0]:.1f}"
                        )
    difference = float(np.abs(np.subtract(agreement["fused"], agreement["fan-out"])).max())
    return {
        "date": datetime.date.today().isoformat(),
        "machine": {
            "cores": len(os.sched_getaffinity(0)),
            "gpu": _gpu_name(),
            "cpu": platform.machine(),
            "python": platform.python_version(),
            "torch": _torch_version(),
            "load_average_start": load_average,
            "load_average_end": os.getloadavg()[0],
        },
        # The run's parameters beside bench/setup_record.py's record, which every result carries as "setup".
        "setup": {
            **record.finish(),
            "members": MEMBERS,
            "images": args.limit,
            "repeats": args.repeats,
            "window_s": args.seconds,
            "warmup_s": args.warmup,
            "loads": [asdict(load) for load in LOADS],
            "max_replicas": args.max_replicas,
        },
        "ways": [asdict(way) for way in ways],
        "fused_vs_fan_out_max_abs_difference": difference,
        "in_process_ms_per_32_images": costs,
        "train_s": trained_s,
        "wall_s": time.perf_counter() - started,
    }


def _gpu_name() -> str | None:
    import torch

    return str(torch.cuda.get_device_name(0)) if torch.cuda.is_available() else None


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def median(values: list[float]) -> float:
    return statistics.median(values)


def ratio(mine: list[float], theirs: list[float]) -> float:
    """The median over repeats of ``mine / theirs``, each repeat's ways measured back to back."""
    return median([a / b for a, b in zip(mine, theirs, strict=True)])


def report_stem(result: dict[str, Any]) -> str:
    return "serving_fused_gpu" if result["machine"].get("gpu") else "serving_fused"


def write_report(result: dict[str, Any], out: Path) -> Path:
    """Write the report of ``result`` (and its JSON) into ``out``; the report's path."""
    out.mkdir(parents=True, exist_ok=True)
    stem = report_stem(result)
    (out / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    ways = {way["name"]: way for way in result["ways"]}
    machine, setup = result["machine"], result["setup"]
    single = ways["single"]
    gpu = machine.get("gpu")
    where = f"the members on one {gpu}" if gpu else "CPU only"
    lines = [
        "# Fused ensemble: throughput of k=5 fused, k=5 fan-out and one member; autoscaled replicas",
        "",
        f"Written by `bench/serving_fused.py` (`make bench-serving-fused`) on {result['date']}, {machine['cores']} "
        f"cores ({machine['cpu']}, Python {machine['python']}, PyTorch {machine['torch']}), {where}, other work "
        f"beside it (load average {machine['load_average_start']:.1f} at the start, "
        f"{machine['load_average_end']:.1f} at the end: times are those of a shared machine); "
        f"{result['wall_s'] / 60:.1f} minutes, {result['train_s']:.0f} s of them setting up and training.",
        "",
        "Five trials of `examples/models/torch_cnn.py` (two conv-BatchNorm-ReLU-pool blocks of 8 and 16 "
        "channels, 3x3, dropout, a linear layer: 28x28 grayscale to 10 classes), trained by `baobab up` on "
        f"{setup['images']:,} Fashion-MNIST images, one epoch each, differing in learning rate, dropout and seed. "
        "Queries are test images (28x28 lists of pixel values) posted to the predictor's `POST /predict`; "
        "answers are class probabilities, the ensemble's averaged. Each way runs as its own "
        "`python -m baobab.predictor` with the default options (`--no-fuse` for the fan-out), one at a time; the "
        "clients are threads of the benchmark's process on keep-alive connections, with request bodies encoded "
        f"beforehand. Images/s is counted over {setup['window_s']:g} s after {setup['warmup_s']:g} s of warm-up; "
        "CPU ms per image is the CPU time of the predictor process and its workers over the same window, per "
        "image answered (less sensitive than time to the other work on the machine). Each load ran "
        f"{setup['repeats']} times, the ways back to back each time; figures are medians over the repeats "
        "(images/s with its range), and a ratio is the median of the repeats' ratios; an autoscaled way's ratios "
        "are against the same way with one replica. The autoscaled ways may use "
        f"up to {setup.get('max_replicas', 1)} worker replicas and are measured after 8 s of warm-up; their "
        "worker processes are the most replicas serving at the end of a window.",
        "",
        "| load | way | worker processes | images/s | vs single | p50 latency ms | CPU ms per image | "
        "single's CPU / this CPU |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    shown = list(ways)
    for load in single["rates"]:
        for name in shown:
            way = ways[name]
            rates = way["rates"][load]
            autoscaled = name.endswith(", autoscaled")
            reference = ways[name.removesuffix(", autoscaled")] if autoscaled else single
            compared = name != "single" and (autoscaled or way["job"] != "large")
            cells = [
                load,
                name,
                str(max(way["replicas"][load]))
                if way.get("replicas") and name.endswith("autoscaled")
                else str(way["processes"]),
                f"{median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f})",
                f"**{ratio(rates, reference['rates'][load]):.2f}x**" if compared else "-",
                f"{median(way['p50_ms'][load]):.1f}",
                f"{median(way['cpu_ms'][load]):.2f}",
                f"{ratio(reference['cpu_ms'][load], way['cpu_ms'][load]):.2f}x" if compared else "-",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for load in single["rates"]:
        fused = ways["fused"]
        against_single = ratio(fused["rates"][load], single["rates"][load])
        holds = "holds" if against_single >= 0.8 else "does not hold"
        lines.append(
            f"- {load}: fused at {against_single:.2f}x the throughput of a single member (the aim, at least "
            f"0.8x, {holds} here), {ratio(fused['rates'][load], ways['fan-out']['rates'][load]):.2f}x the fan-out's; "
            f"by CPU per image, {ratio(single['cpu_ms'][load], fused['cpu_ms'][load]):.2f}x a single member and "
            f"{ratio(ways['fan-out']['cpu_ms'][load], fused['cpu_ms'][load]):.2f}x the fan-out."
        )
    for base, scaled in ((ways[n], ways[f"{n}, autoscaled"]) for n in ways if f"{n}, autoscaled" in ways):
        for load in base["rates"]:
            lines.append(
                f"- {base['name']}, {load}: autoscaled to {'/'.join(map(str, scaled['replicas'][load]))} replicas "
                f"(at most {setup['max_replicas']}), {ratio(scaled['rates'][load], base['rates'][load]):.2f}x the "
                f"throughput of one replica, p50 latency {median(scaled['p50_ms'][load]):.1f} ms against "
                f"{median(base['p50_ms'][load]):.1f} ms."
            )
    costs = result["in_process_ms_per_32_images"]
    lines += [
        "",
        "What the members' arithmetic costs, measured in the benchmark's process on one torch thread (the "
        "median of 30 calls, 32 test images): "
        f"{costs['one member']:.1f} ms for one member's `predict`, {costs['five members in turn']:.1f} ms for the "
        f"five members' one after another, {costs['five members stacked']:.1f} ms for the five stacked "
        "(`baobab.model.StackedPredictor`, as the fused worker runs them).",
        "",
        f"The fused and fan-out ensembles' probabilities for 32 test images differ by at most "
        f"{result['fused_vs_fan_out_max_abs_difference']:.1e}.",
        "",
        "## What the setup favours",
        "",
        *(_gpu_notes(result) if gpu else _cpu_notes(result)),
    ]
    if "commit" in setup:  # a result from before bench/setup_record.py (``--markdown``) has no record
        lines += ["", setup_markdown(setup)]
    path = out / f"{stem}.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _cpu_notes(result: dict[str, Any]) -> list[str]:
    single = next(way for way in result["ways"] if way["name"] == "single")
    costs = result["in_process_ms_per_32_images"]
    first = next(iter(single["cpu_ms"]))
    return [
        "- The stacked pass still computes five networks: fusion saves the fan-out's per-process costs (five "
        "pipes, five JSON round trips each way, five processes taking turns on two cores), not arithmetic. A "
        f"single member's predictor and worker spend {median(single['cpu_ms'][first]):.2f} CPU ms per image "
        f"({first}), its `predict` about {costs['one member'] / 32:.2f} of them; stacking four more members "
        f"adds about {(costs['five members stacked'] - costs['one member']) / 32:.2f} ms per image of arithmetic, "
        "plus their answers to write, read, check and average. Where CPU is the bound, the fused ensemble's "
        "throughput against one member is the ratio of those costs, so 0.8x needs members whose forward pass is "
        "a small part (under about a tenth) of what serving an image costs: a smaller model, or cheaper "
        "serving. A larger network takes the fused ensemble towards a fifth of one member's throughput.",
        "- The machine was busy (the clients, and other work: see the load averages), and the throughput ratios "
        "followed the CPU ratios. On a machine with a core to spare for the fused worker while the predictor "
        "parses the next requests, its extra arithmetic would overlap the predictor's work and cost less time "
        "than CPU; that was not measured here.",
        "- Every worker process has one torch thread, the fused one too: on two threads beside its predictor it "
        "ran slower on these shared cores (a first run of this benchmark, 1 client x 32 images: 173 images/s on "
        "two threads, 781 on one). BatchNorm is folded into the convolutions before the members are "
        "stacked (vmap would apply each member's BatchNorm as extra passes); the single member and the fan-out "
        "run the template's module as it is.",
        "- Two cores: with a core per member the fan-out's five workers would compute in parallel and its gap to "
        "fused would narrow; on a GPU the stacked pass runs each layer as one kernel for the five and the gap "
        "would widen. Neither was measured here.",
        "- Autoscaling: the replicas share the machine's two cores with the predictor and the clients, so a "
        "second replica helps only a model whose arithmetic is most of the cost (the large CNN), and only under "
        "concurrent requests: one client's requests go one at a time, and the autoscaler, which counts requests, "
        "leaves them one replica.",
    ]


def _gpu_notes(result: dict[str, Any]) -> list[str]:
    costs = result["in_process_ms_per_32_images"]
    ways = {way["name"]: way for way in result["ways"]}
    load = next(iter(ways["single"]["cpu_ms"]))
    return [
        f"- The members answer on the GPU ({result['machine']['gpu']}), each worker process with a CUDA context of "
        "its own; the predictor's HTTP, JSON and ensembling, and the clients, run on the CPU cores.",
        "- The stacked pass is not what the fused ensemble waits for: in the benchmark's process on the same GPU "
        f"(the median of 30 calls, 32 test images) one member's `predict` took {costs['one member']:.1f} ms, the "
        f"five one after another {costs['five members in turn']:.1f} ms, the five stacked "
        f"{costs['five members stacked']:.1f} ms (copies to and from the GPU included). What the fused worker adds "
        "is on the CPU: five answers per image to encode, send, parse, check and average, "
        f"{median(ways['fused']['cpu_ms'][load]):.2f} CPU ms per image against "
        f"{median(ways['single']['cpu_ms'][load]):.2f} for one member ({load}).",
        "- Autoscaled replicas of a GPU member share the one GPU, and with a small model the predictor's own "
        "process (HTTP and JSON on the CPU) is the bound, which more workers do not lift. The large CNN's ways "
        "hide the GPU so that its replicas compute on the CPU cores, where a replica is a core's worth of work.",
        *(
            ["- One repeat (`--quick`): a ratio of one repeat moves by several percent between runs."]
            if result["setup"]["repeats"] == 1
            else []
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one repeat, shorter windows")
    parser.add_argument("--limit", type=int, default=3000, help="Fashion-MNIST images to train on")
    parser.add_argument(
        "--max-replicas",
        type=int,
        default=min(4, len(os.sched_getaffinity(0))),
        help="the autoscaled way's BAOBAB_PREDICTOR_MAX_REPLICAS",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the report and its JSON go")
    parser.add_argument("--markdown", type=Path, help="only write the report of this results JSON again")
    args = parser.parse_args()
    if args.markdown is not None:
        print(write_report(json.loads(args.markdown.read_text()), args.out).read_text())
        return
    args.repeats, args.seconds, args.warmup = (1, 5.0, 1.0) if args.quick else (5, 6.0, 1.5)
    print(write_report(run(args), args.out).read_text())


if __name__ == "__main__":
    main()
