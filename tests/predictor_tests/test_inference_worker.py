"""Inference worker processes: load from the artifact store, predict over the pipe, fail in the open."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from predictor_world import TINY, pid_alive, tabular_frame

from baobab._sandbox import Confinement
from baobab.model import load_template
from baobab.store import ArtifactStore, params_to_bytes, write_tabular
from baobab.testing import wait_until
from baobab.worker import InferenceSpec, InferenceWorker, InferenceWorkerError


@pytest.fixture
def stored(tmp_path: Path) -> tuple[ArtifactStore, str, str, object, list[list[float]]]:
    """A TinyRegressor trained on diabetes, its template and parameters in an artifact store."""
    store = ArtifactStore(tmp_path / "artifacts")
    data = TINY.read_bytes()
    checksum = hashlib.sha256(data).hexdigest()
    store.put_bytes(f"templates/{checksum}.py", data)
    frame = tabular_frame("diabetes")
    model = load_template(TINY, "TinyRegressor")(offset=1.5, raise_on=777, crash_on=999, sleep_on=888)
    model.train(str(write_tabular(tmp_path / "diabetes.csv", frame)))
    store.put_bytes("params/trial-7.safetensors", params_to_bytes(model.dump_parameters()))
    rows = frame.drop(columns="target").to_numpy()[:4].tolist()
    return store, checksum, str(tmp_path / "cache"), model, rows


def spec(stored: tuple, **changes: object) -> InferenceSpec:
    store, checksum, cache_dir, model, _ = stored
    fields = {
        "trial_id": 7,
        "artifacts_url": store.url,
        "template_key": f"templates/{checksum}.py",
        "template_checksum": checksum,
        "class_name": "TinyRegressor",
        "knobs": dict(model.knobs),
        "params_key": "params/trial-7.safetensors",
        "cache_dir": cache_dir,
        # The artifacts are out of the template's reach, as a platform's are.
        "confinement": Confinement((Path(store.url),), private=Path(cache_dir).parent / "private").to_json(),
    }
    return InferenceSpec(**{**fields, **changes})


@pytest.fixture
def worker(stored: tuple, tmp_path: Path) -> Iterator[InferenceWorker]:
    worker = InferenceWorker(spec(stored), log_path=tmp_path / "worker.log")
    yield worker
    worker.close()


def test_a_worker_predicts_like_the_trained_model(worker: InferenceWorker, stored: tuple) -> None:
    _, _, _, model, rows = stored
    worker.start(timeout=60)
    assert worker.alive
    assert worker.predict(rows, timeout=30) == model.predict(rows)
    assert worker.predict([], timeout=30) == []


def test_a_raising_predict_is_not_fatal_and_a_crash_is(worker: InferenceWorker, stored: tuple) -> None:
    rows = stored[4]
    worker.start(timeout=60)
    with pytest.raises(InferenceWorkerError, match=r"^predict\(\) raised ValueError: cannot predict") as caught:
        worker.predict([[777.0] + rows[0][1:]], timeout=30)
    assert caught.value.fatal is False
    assert len(worker.predict(rows, timeout=30)) == len(rows)
    assert "Traceback" in worker.log_tail()  # the template's traceback went to the log, not to the answer

    with pytest.raises(InferenceWorkerError, match="exited with status 3 while predicting") as caught:
        worker.predict([[999.0] + rows[0][1:]], timeout=30)
    assert caught.value.fatal is True
    assert not worker.alive


def test_a_hanging_predict_is_killed_after_the_timeout(worker: InferenceWorker, stored: tuple) -> None:
    rows = stored[4]
    worker.start(timeout=60)
    pid = worker.pid
    assert pid is not None
    with pytest.raises(InferenceWorkerError, match=r"no answer within 0.5 s while predicting; .* killed") as caught:
        worker.predict([[888.0] + rows[0][1:]], timeout=0.5)
    assert caught.value.fatal is True
    wait_until(lambda: not pid_alive(pid), timeout=10, what="the hanging worker to be gone")


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"class_name": "Nope"}, "cannot load the template: .*no class 'Nope'; classes defined in the file: "),
        ({"params_key": "params/missing.safetensors"}, "cannot read the parameters of trial 7: .*no such artifact"),
        ({"params_key": ""}, "trial 7 has no stored parameters"),
    ],
)
def test_load_failures_say_why(stored: tuple, tmp_path: Path, changes: dict, words: str) -> None:
    worker = InferenceWorker(spec(stored, **changes), log_path=tmp_path / "worker.log")
    try:
        with pytest.raises(InferenceWorkerError, match=words) as caught:
            worker.start(timeout=60)
        assert caught.value.fatal is True
        assert not worker.alive
    finally:
        worker.close()
