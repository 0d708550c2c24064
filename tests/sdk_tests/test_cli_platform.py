"""The ``baobab`` commands that talk HTTP, through the real command group, against a real API on loopback.

The saved login goes to ``$XDG_CONFIG_HOME/baobab/credentials.json``, here under tmp_path.
"""

from __future__ import annotations

import json
import stat
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import TEMPLATE, trained_app
from PIL import Image
from werkzeug.wrappers import Request, Response

from baobab.cli import main
from baobab.cli.predict import image_query
from baobab.sdk import Client
from baobab.store import build_tabular, request_log_part_key

ApiServer = Any  # conftest.ApiServer: url, app, settings, root_email, root_password
sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home / "baobab" / "credentials.json"


def run(args: list[str], input: str | None = None) -> Result:
    return CliRunner().invoke(main, args, input=input)


def assert_error(result: Result, message: str) -> None:
    """Exit status 1, ``error: message`` first on stderr, nothing on stdout, no traceback."""
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"error: {message}"), result.stderr
    assert result.stdout == "" and "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def record(stdout: str) -> dict[str, str]:
    """The ``name:  value`` lines that ``show`` commands print first (up to a blank line)."""
    head = stdout.split("\n\n", 1)[0]
    return {name: value.strip() for name, value in (line.split(":", 1) for line in head.splitlines())}


def test_login_then_datasets(api_server: ApiServer, config_home: Path, tmp_path: Path) -> None:
    url = api_server.url
    result = run(["login", "--url", url, "--email", api_server.root_email], input=api_server.root_password + "\n")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-2:] == [
        f"logged in to {url} as {api_server.root_email} (SUPERADMIN)",
        f"token saved in {config_home}, valid for 24 hours",
    ]
    assert stat.S_IMODE(config_home.stat().st_mode) == 0o600
    assert stat.S_IMODE(config_home.parent.stat().st_mode) == 0o700
    saved = json.loads(config_home.read_text())
    assert set(saved) == {"url", "token"} and saved["url"] == url
    assert Client(url, saved["token"]).list_users()[0]["email"] == api_server.root_email

    # No --url from now on: the saved one is used.
    train = build_tabular("wine", tmp_path / "wine").splits[0].path
    result = run(["datasets", "upload", str(train), "--target", "target"])
    assert result.exit_code == 0, result.output
    size = f"{train.stat().st_size / 1024:.1f} KiB"
    assert result.stdout == f"uploaded dataset 1 'train.csv': TABULAR, {size}\n"
    result = run(["datasets", "upload", str(train), "--name", "wine val", "--format", "tabular", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["name"] == "wine val"

    result = run(["datasets", "list"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["id", "name", "format", "size", "owner", "created"]
    assert [line.split()[0] for line in lines[2:]] == ["2", "1"]
    assert lines[2].split()[1:5] == ["wine", "val", "TABULAR", size.split()[0]]
    assert [d["id"] for d in json.loads(run(["datasets", "list", "--json"]).stdout)] == [2, 1]

    result = run(["datasets", "show", "1"])
    assert result.exit_code == 0, result.output
    shown = record(result.stdout)
    assert (shown["name"], shown["format"], len(shown["checksum"])) == ("train.csv", "TABULAR", 64)
    assert_error(run(["datasets", "show", "99"]), "no dataset with id 99\n")

    result = run(["datasets", "delete", "1"], input="n\n")
    assert result.exit_code == 1 and "delete dataset 1 'train.csv'? [y/N]" in result.stderr
    result = run(["datasets", "delete", "1"], input="y\n")
    assert result.exit_code == 0 and result.stdout == "deleted dataset 1\n", result.output
    assert run(["datasets", "delete", "2", "--yes"]).stdout == "deleted dataset 2\n"
    result = run(["datasets", "list"])
    assert result.stdout == "no datasets; upload one with `baobab datasets upload FILE`\n"

    result = run(["logout"])
    assert result.stdout == f"logged out of {url}\n" and not config_home.exists()
    assert run(["logout"]).stdout == "not logged in\n"


@sqlite_only
def test_errors_are_one_line_without_traceback(
    api_server: ApiServer, config_home: Path, tmp_path: Path, closed_port: int
) -> None:
    url = api_server.url
    result = run(["login", "--url", url, "--email", api_server.root_email, "--password", "wrong-password"])
    assert_error(result, "wrong email or password\n")
    assert not config_home.exists()

    result = run(["datasets", "list", "--url", url])
    assert_error(result, "missing Authorization header: send 'Authorization: Bearer <token>' with a token from ")
    assert f"you are not logged in to {url}: run `baobab login --url {url} --email EMAIL`" in result.stderr

    assert run(["login", "--url", url, "--email", api_server.root_email, "--password", api_server.root_password])
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n")
    assert_error(run(["datasets", "upload", str(bad)]), "bad.csv: no data rows: the dataset is empty (field: file)\n")
    result = run(["datasets", "upload", str(bad), "--format", "image_files"])
    assert_error(result, "bad.csv: not a readable zip file: File is not a zip file (field: file)\n")
    odd = tmp_path / "data.parquet"
    odd.write_text("x")
    result = run(["datasets", "upload", str(odd)])
    assert result.exit_code == 2 and "cannot tell the format of 'data.parquet': give it" in result.stderr

    # The saved token is for the saved URL only: another server never gets it.
    elsewhere = f"http://127.0.0.1:{closed_port}"
    result = run(["datasets", "list", "--url", elsewhere])
    assert_error(
        result,
        f"cannot connect to the Baobab server at {elsewhere}: connection refused; is `baobab up` running, and is "
        f"this its URL?\n",
    )
    token = json.loads(config_home.read_text())["token"]
    config_home.write_text(json.dumps({"url": url, "token": token[:-4] + "AAAA"}))
    result = run(["datasets", "list"])
    assert_error(result, "invalid token: it was not issued by this server\n")
    assert f"the saved login was refused: run `baobab login --url {url} --email EMAIL`" in result.stderr


def test_commands_parse_before_they_call(config_home: Path, closed_port: int, tmp_path: Path) -> None:
    """Usage errors come before any request; well-formed commands reach the (here missing) server."""
    url = f"http://127.0.0.1:{closed_port}"
    refused = f"cannot connect to the Baobab server at {url}: connection refused"
    create = ["jobs", "create", "--url", url, "--app", "a", "--task", "tabular_classification", "--train", "1"]
    create += ["--val", "2", "--model", "3"]
    result = run([*create, "--budget", "TRIALS"])
    assert result.exit_code == 2 and "'TRIALS' is not KEY=VALUE" in result.stderr
    result = run([*create, "--budget", "model_trial_count=3", "--budget", "MODEL_TRIAL_COUNT=4"])
    assert result.exit_code == 2 and "'MODEL_TRIAL_COUNT' is given twice" in result.stderr
    result = run([*create, "--budget", "TIME_HOURS=soon"])
    assert result.exit_code == 2 and "TIME_HOURS: 'soon' is not a JSON value" in result.stderr
    assert_error(run([*create, "--budget", "MODEL_TRIAL_COUNT=3", "--target", "target"]), refused)

    # `baobab serve APP` is `baobab serve start APP`.
    assert_error(run(["serve", "--url", url, "my-app", "--k", "3"]), refused)
    assert_error(run(["serve", "my-app", "--url", url]), refused)
    result = run(["serve", "my-app", "--k", "2", "--trial", "5", "--url", url])
    assert result.exit_code == 2 and "give --k or --trial, not both" in result.stderr
    assert ["start", "Start", "an", "inference", "job"] in [
        line.split()[:5] for line in run(["serve", "--help"]).stdout.splitlines()
    ]
    assert_error(run(["serve", "stop", "4", "--url", url]), refused)
    assert_error(run(["serve", "rollout", "4", "v1=1,2@0.5", "v2=3", "--url", url]), refused)
    result = run(["serve", "rollout", "4", "v1=1,x", "--url", url])
    assert result.exit_code == 2 and "'v1=1,x' is not NAME=TRIAL[,TRIAL...][@WEIGHT]" in result.stderr
    assert run(["serve", "rollout", "4", "--url", url]).exit_code == 2  # no version
    assert_error(run(["serve", "promote", "4", "v2", "--url", url]), refused)
    assert_error(run(["serve", "rollback", "4", "--url", url]), refused)

    assert_error(run(["models", "list", "--url", url]), refused)
    result = run(["models", "upload", str(config_home.parent), "--task", "x", "--class", "C", "--url", url])
    assert result.exit_code == 2  # not a file (here: missing)
    model = tmp_path / "m.py"
    model.write_text("")
    result = run(["models", "upload", str(model), "--task", "x", "--class", "C", "--dependency", "numpy"])
    assert result.exit_code == 2 and "'numpy' is not NAME==VERSION" in result.stderr

    queries = tmp_path / "queries.json"
    queries.write_text("[[1, 2], [3, 4]]")
    result = run(["predict", "--url", url, "--queries", str(queries)])
    assert_error(result, f"cannot connect to the predictor at {url}: connection refused; is it running?\n")
    result = run(["predict", "--url", url])
    assert result.exit_code == 2 and "give --queries FILE.json or --image" in result.stderr
    queries.write_text("{}")
    result = run(["predict", "--url", url, "--queries", str(queries)])
    assert result.exit_code == 2 and "must hold a non-empty JSON list of queries" in result.stderr


def test_image_queries(tmp_path: Path) -> None:
    gray = Image.new("L", (3, 2))
    gray.putdata([0, 1, 2, 100, 200, 255])
    gray.save(tmp_path / "gray.png")
    assert image_query(tmp_path / "gray.png") == [[0, 1, 2], [100, 200, 255]]
    rgb = Image.new("RGB", (2, 1))
    rgb.putdata([(1, 2, 3), (4, 5, 6)])
    rgb.save(tmp_path / "rgb.png")
    assert image_query(tmp_path / "rgb.png") == [[[1, 2, 3], [4, 5, 6]]]
    Image.new("1", (2, 2), 1).save(tmp_path / "bits.png")
    assert image_query(tmp_path / "bits.png") == [[255, 255], [255, 255]]
    Image.new("RGBA", (1, 1)).save(tmp_path / "rgba.png")
    with pytest.raises(ValueError, match="has mode RGBA; use 8-bit grayscale"):
        image_query(tmp_path / "rgba.png")
    (tmp_path / "not.png").write_text("no")
    with pytest.raises(ValueError, match="not.png: not a readable image"):
        image_query(tmp_path / "not.png")


def test_models_jobs_and_serving(api_server: ApiServer, backstage: Any, config_home: Path, tmp_path: Path) -> None:
    login = ["login", "--url", api_server.url, "--email", api_server.root_email]
    assert run([*login, "--password", api_server.root_password]).exit_code == 0
    template = tmp_path / "tiny.py"
    template.write_text(TEMPLATE)
    args = ["models", "upload", str(template), "--task", "tabular_classification", "--class", "Tiny"]
    result = run([*args, "--dependency", "numpy==2.0", "--public"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "uploaded model 1 'tiny': TABULAR_CLASSIFICATION, PUBLIC; knobs: lr\n"
    assert_error(run([*args[:-1], "Nope"]), "")
    result = run(["models", "list"])
    assert result.stdout.splitlines()[2].split()[:5] == ["1", "tiny", "TABULAR_CLASSIFICATION", "Tiny", "PUBLIC"]
    result = run(["models", "show", "1"])
    assert record(result.stdout)["dependencies"] == "numpy==2.0"
    assert result.stdout.splitlines()[-1].split()[:2] == ["lr", "FloatKnob"] and "is_exp=True" in result.stdout
    result = run(["models", "download", "1", "--out", str(tmp_path / "copy.py")])
    assert result.stdout == f"wrote {tmp_path / 'copy.py'}\n" and (tmp_path / "copy.py").read_text() == TEMPLATE

    data = tmp_path / "data.csv"
    data.write_text("x1,x2,label\n1.0,2.0,cat\n3.0,4.0,dog\n")
    assert run(["datasets", "upload", str(data)]).exit_code == 0
    create = ["jobs", "create", "--app", "fraud", "--task", "TABULAR_CLASSIFICATION", "--train", "1", "--val", "1"]
    create += ["--model", "1", "--budget", "model_trial_count=2", "--target", "label", "--train-arg", "epochs=2"]
    result = run([*create, "--budget", "TIME_HOURS=0"])
    assert_error(result, "budget.TIME_HOURS: must be above 0")
    assert result.stderr.rstrip().endswith("(field: budget.TIME_HOURS)")
    result = run(create)
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "created train job fraud v1 (id 1): 1 model, budget GPU_COUNT=0, MODEL_TRIAL_COUNT=2\n"
        "watch it with `baobab jobs watch fraud --version 1`\n"
    )
    job = json.loads(run(["jobs", "show", "fraud", "--json"]).stdout)
    assert (job["train_args"], job["target"], job["budget"]["MODEL_TRIAL_COUNT"]) == ({"epochs": 2}, "label", 2)
    assert_error(run(["models", "delete", "1", "--yes"]), "model 1 is used by a train job")
    result = run(["jobs", "list"])
    assert result.stdout.splitlines()[2].split()[:6] == ["1", "fraud", "1", "TABULAR_CLASSIFICATION", "PENDING", "0/2"]
    result = run(["jobs", "show", "fraud"])
    assert record(result.stdout)["status"] == "PENDING"
    assert (record(result.stdout)["target"], record(result.stdout)["train args"]) == ("label", '{"epochs": 2}')
    assert result.stdout.splitlines()[-1].split()[:5] == ["1", "1", "tiny", "auto", "PENDING"]
    assert run(["jobs", "trials", "fraud"]).stdout == "no trials\npage 1 of 1 (0 trials)\n"
    assert_error(run(["serve", "fraud"]), "train job 'fraud' version 1 has no trained trials yet")

    params = {"bias": 0.5}
    best = backstage.add_trial(1, 0, "COMPLETED", 0.875, params=params, logs=("loading", "training"))
    backstage.add_trial(1, 1, "ERRORED", error="ValueError: no column 'label'\nmore")
    result = run(["jobs", "trials", "fraud", "--sort", "-score"])
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["id", "no.", "model", "status", "score", "duration", "(s)", "knobs", "error"]
    assert lines[2].split()[:5] == [str(best), "0", "tiny", "COMPLETED", "0.875"] and "lr=0.01" in lines[2]
    assert lines[3].split()[3] == "ERRORED" and lines[3].endswith("ValueError: no column 'label'")
    assert lines[-1] == "page 1 of 1 (2 trials)"
    result = run(["jobs", "trials", "fraud", "--status", "errored", "--json"])
    assert [t["number"] for t in json.loads(result.stdout)["trials"]] == [1]
    assert run(["jobs", "best", "fraud", "-k", "1"]).stdout.splitlines()[2].split()[:5] == [
        str(best), "0", "tiny", "COMPLETED", "0.875",
    ]  # fmt: skip
    result = run(["jobs", "trial", str(best + 1)])
    assert record(result.stdout)["status"] == "ERRORED"
    assert result.stdout.endswith("Traceback (most recent call last):\nValueError: no column 'label'\nmore\n")
    result = run(["jobs", "trial", str(best), "--logs", "--params", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert [line.split("  ", 1)[1] for line in result.stdout.splitlines()[-3:-1]] == ["loading", "training"]
    assert result.stdout.splitlines()[-1] == f"wrote {tmp_path / f'trial-{best}.safetensors'}"

    # Serving: the supervisor's part is played by the backstage.
    result = run(["serve", "fraud", "--k", "1"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"inference job 1 for fraud v1: trial {best} (tiny, score 0.875)"
    assert lines[1].startswith("API key: ") and lines[1].endswith("(shown only now: keep it)")
    assert lines[2] == "status STARTING; see its predictor URL with `baobab serve show 1`"
    backstage.later(0.3, lambda: backstage.set_inference_job(2, "RUNNING", "http://127.0.0.1:9/"))
    result = run(["serve", "start", "fraud", "--version", "1", "--trial", str(best), "--public", "--wait"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-2:] == [
        "predictor URL: http://127.0.0.1:9/",
        "predict with `baobab predict --url http://127.0.0.1:9/ --queries FILE.json`",
    ]
    backstage.later(0.3, lambda: backstage.set_inference_job(3, "ERRORED", error="out of memory"))
    result = run(["serve", "fraud", "--wait", "--timeout", "30"])
    assert (result.exit_code, result.stderr) == (1, "error: inference job 3 is ERRORED: out of memory\n")
    assert "API key: " in result.stdout  # printed before the wait: the key is not lost
    result = run(["serve", "list"])
    assert [line.split()[:4] for line in result.stdout.splitlines()[2:]] == [
        ["3", "fraud", "1", "ERRORED"], ["2", "fraud", "1", "RUNNING"], ["1", "fraud", "1", "STARTING"],
    ]  # fmt: skip
    assert record(run(["serve", "show", "2"]).stdout)["predictor"] == "http://127.0.0.1:9/"
    assert run(["serve", "stop", "2"]).stdout == "inference job 2 is STOPPED\n"

    # Request logs: the backstage writes a part as the predictor would.
    result = run(["serve", "fraud", "--k", "1", "--log-rate", "1.5"])
    assert result.exit_code == 2 and "1.5 is not in the range 0<=x<=1" in result.stderr
    result = run(["serve", "fraud", "--k", "1", "--log-rate", "0.5", "--json"])
    assert (json.loads(result.stdout)["id"], json.loads(result.stdout)["request_log_rate"]) == (4, 0.5)
    assert record(run(["serve", "show", "4"]).stdout)["request log rate"] == "0.5"
    no_logs = "inference job 2 logged no requests (a job logs them when started with --log-rate)\n"
    assert run(["serve", "logs", "2"]).stdout == no_logs
    part = request_log_part_key(2, date(2026, 4, 1), "120000000000-aaaaaaaa-000001")
    backstage.artifacts.put_bytes(part, b'{"n": 1}\n{"n": 2}\n')
    assert run(["serve", "logs", "2"]).stdout.splitlines()[2].split() == [
        "2026-04-01",
        "18",
        "B",
        "inference-2-2026-04-01.jsonl",
    ]
    result = run(["serve", "logs", "2", "2026-04-01", "--out", str(tmp_path)])
    assert result.stdout == f"wrote {tmp_path / 'inference-2-2026-04-01.jsonl'}\n"
    assert (tmp_path / "inference-2-2026-04-01.jsonl").read_bytes() == b'{"n": 1}\n{"n": 2}\n'
    assert_error(run(["serve", "logs", "2", "April"]), "day 'April' is not a date YYYY-MM-DD")
    assert run(["serve", "logs", "2", "--out", str(tmp_path)]).exit_code == 2  # --out needs a DAY
    assert_error(run(["serve", "delete", "1", "--yes"]), "inference job 1 is STARTING; stop it first")
    assert run(["serve", "delete", "2"], input="n\n").exit_code == 1  # not confirmed: kept
    assert run(["serve", "delete", "2", "--yes"]).stdout == "deleted inference job 2\n"
    assert_error(run(["serve", "logs", "2"]), "no inference job with id 2")
    assert not backstage.artifacts.exists(part)
    assert_error(run(["serve", "show", "99"]), "no inference job with id 99\n")

    assert run(["jobs", "stop", "fraud"]).stdout == "train job fraud v1 is STOPPING\n"
    backstage.later(0.3, lambda: backstage.set_train_job(1, "STOPPED"))
    result = run(["jobs", "watch", "fraud", "--version", "1"])
    assert result.exit_code == 0, result.output
    assert "fraud v1" in result.stderr and "2/2" in result.stderr  # the progress bar
    assert result.stdout.splitlines()[0] == "train job fraud v1 is STOPPED: 1 completed, 1 errored, best score 0.875"
    assert result.stdout.splitlines()[3].split()[:2] == [str(best), "0"]
    backstage.set_train_job(1, "ERRORED")
    result = run(["jobs", "watch", "fraud"])
    assert result.exit_code == 1 and "is ERRORED: 1 completed, 1 errored" in result.stdout
    assert result.stderr.endswith("\nerror: train job fraud v1 ERRORED; see `baobab jobs trials fraud`\n")

    # Job options: --option NAME=JSON, each refused naming its field when bad.
    optioned = [*create[:3], "opts", *create[4:]]  # another app: the listings below show fraud's one job
    assert_error(run([*optioned, "--option", "fusion=always"]), "options.fusion: must be 'off' or 'auto', got 'always'")
    result = run([*optioned, "--option", "early_stopping=asha", "--option", 'policies={"EARLY_STOP": true}'])
    assert result.exit_code == 0, result.output
    job = json.loads(run(["jobs", "show", "opts", "--json"]).stdout)
    assert (job["options"]["early_stopping"], job["options"]["policies"]["EARLY_STOP"]) == ("asha", True)


def test_forecast_a_job_before_creating_it(
    api_server: ApiServer, backstage: Any, config_home: Path, tmp_path: Path
) -> None:
    login = ["login", "--url", api_server.url, "--email", api_server.root_email]
    assert run([*login, "--password", api_server.root_password]).exit_code == 0
    template = tmp_path / "tiny.py"
    template.write_text(TEMPLATE)
    assert (
        run(["models", "upload", str(template), "--task", "tabular_classification", "--class", "Tiny"]).exit_code == 0
    )
    data = tmp_path / "data.csv"
    data.write_text("x1,x2,label\n1.0,2.0,cat\n3.0,4.0,dog\n")
    assert run(["datasets", "upload", str(data)]).exit_code == 0
    spec = ["--app", "fraud", "--task", "TABULAR_CLASSIFICATION", "--train", "1", "--val", "1", "--model", "1"]
    spec += ["--train-arg", "target=label"]
    forecast = ["jobs", "forecast", *spec]
    four = [*forecast, "--budget", "MODEL_TRIAL_COUNT=4"]
    assert_error(run([*four, "--slots", "1"]), "no forecast: no trial of model 1 ('tiny') has finished yet")
    assert run(["jobs", "create", *spec, "--budget", "MODEL_TRIAL_COUNT=2"]).exit_code == 0
    for number in range(2):
        backstage.add_trial(1, number, "COMPLETED", 0.5, seconds=30.0)

    result = run([*four, "--workers", "2", "--slots", "1"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "4 trials on 2 workers of 1 slot, from 2 finished trials:"
    assert lines[1].split() == ["method", "time", "(s)", "trials", "finished", "unfinished", "utilisation"]
    rows = {line.split()[0]: line.split() for line in lines[3:]}
    assert set(rows) == {"search", "fcfs", "largest_first", "shortest_first"}
    assert rows["fcfs"][1:4] == ["60.0", "4", "0"]  # 4 trials of 30 s, two at a time
    answer = json.loads(run([*four, "--slots", "1", "--json"]).stdout)
    fcfs = next(f for f in answer["forecasts"] if f["method"] == "fcfs")
    assert fcfs["seconds"] == pytest.approx(120.0, rel=0.01)
    assert_error(run([*forecast, "--budget", "MODEL_TRIAL_COUNT=5000"]), "a forecast plays at most 2000 trials")
    assert run(["jobs", "list", "--json"]).stdout.count('"app_version"') == 1  # only the job created


def test_predict(odd_server: Any, tmp_path: Path) -> None:
    seen: list[tuple[str | None, Any]] = []

    def predictor(request: Request) -> Response:
        seen.append((request.headers.get("Authorization"), request.get_json()))
        if request.headers.get("Authorization") != "Bearer the-key":
            body = {"error": {"code": "unauthorized", "message": "a valid API key is required", "field": None}}
            return Response(json.dumps(body), 401, mimetype="application/json")
        queries = request.get_json()["queries"]
        answer = {
            "predictions": [[0.25, 0.75] if i % 2 else 1 for i in range(len(queries))],
            "members": {"answered": [4], "left_out": [{"trial_id": 5, "reason": "timed out after 10 s"}]},
        }
        return Response(json.dumps(answer), mimetype="application/json")

    url = odd_server(predictor)
    queries = tmp_path / "queries.json"
    queries.write_text("[[1.5, 2], [3, 4]]")
    result = run(["predict", "--url", url, "--api-key", "the-key", "--queries", str(queries)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "query 0: 1\nquery 1: [0.25, 0.75]\n"
    assert result.stderr == "left out trial 5: timed out after 10 s\n"
    assert seen[-1] == ("Bearer the-key", {"queries": [[1.5, 2], [3, 4]]})

    image = tmp_path / "seven.png"
    Image.new("L", (2, 2), 7).save(image)
    result = run(["predict", "--url", url + "/", "--api-key", "the-key", "--image", str(image), "--json"])
    assert json.loads(result.stdout)["predictions"] == [1] and seen[-1][1] == {"queries": [[[7, 7], [7, 7]]]}
    assert_error(run(["predict", "--url", url, "--queries", str(queries)]), "a valid API key is required\n")
    assert seen[-1][0] is None


def test_serving_versions(api_server: ApiServer, backstage: Any, config_home: Path, tmp_path: Path) -> None:
    """``baobab serve rollout|promote|rollback|versions``; the predictor's writes are played by the backstage."""
    login = ["login", "--url", api_server.url, "--email", api_server.root_email]
    assert run([*login, "--password", api_server.root_password]).exit_code == 0
    with Client(api_server.url) as client:
        client.login(api_server.root_email, api_server.root_password)
        low, mid, high = trained_app(client, backstage, tmp_path, "shop")
        job = str(client.create_inference_job("shop", k=1)["id"])

    result = run(["serve", "rollout", job, f"v1={high}@0.75", f"v2={low},{mid}@0.25"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"inference job {job}, revision 2:"
    assert lines[1].split() == ["version", "weight", "share", "trials"]
    assert [line.split() for line in lines[3:5]] == [
        ["v1", "0.75", "75%", str(high)], ["v2", "0.25", "25%", f"{mid},", str(low)]
    ]  # fmt: skip
    assert lines[5:] == [f"the predictor of inference job {job} is not serving yet (STARTING)"]
    backstage.serve_revision(int(job), 1)
    shown = run(["serve", "versions", job]).stdout.splitlines()
    assert shown[-1] == "the predictor serves revision 1 until the new versions are loaded"

    backstage.later(0.3, lambda: backstage.serve_revision(int(job), 3))
    result = run(["serve", "promote", job, "v2", "--wait", "--timeout", "30"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"inference job {job}, revision 3:"
    assert lines[3].split() == ["v2", "1", "100%", f"{mid},", str(low)]
    assert lines[4:] == [f"served now; `baobab serve rollback {job}` goes back"]

    assert json.loads(run(["serve", "rollback", job, "--json"]).stdout)["revision"] == 4
    backstage.fail_revision(int(job), 4, "no member could be loaded: trial 1: boom")
    shown = run(["serve", "versions", job]).stdout.splitlines()
    assert shown[-2:] == ["not served: no member could be loaded: trial 1: boom", "the predictor serves revision 3"]
    result = run(["serve", "rollback", job, "--wait", "--timeout", "0.2"])
    assert_error(result, f"inference job {job} does not serve revision 5 after 0.2 s")
    assert_error(run(["serve", "rollback", job]), f"inference job {job} has nothing to roll back to: revision 5")

    result = run(["serve", "rollout", job, "v1"])
    assert result.exit_code == 2 and "'v1' is not NAME=TRIAL[,TRIAL...][@WEIGHT]" in result.stderr
    result = run(["serve", "rollout", job, f"v1={high}@-1"])
    assert_error(result, "'versions[0].weight' is -1.0; it must be between 0 and 1000000")
    assert result.stderr.rstrip().endswith("(field: versions[0].weight)")

    history = run(["serve", "versions", job, "--history"]).stdout.splitlines()
    assert [line.split()[:2] for line in history[2:]] == [
        ["5", "ROLLBACK"], ["4", "ROLLBACK"], ["3", "PROMOTE"], ["2", "ROLLOUT"], ["1", "CREATE"]
    ]  # fmt: skip
    assert history[3].endswith("no member could be loaded: trial 1: boom")
    shown_job = record(run(["serve", "show", job]).stdout)
    assert (shown_job["versions"], shown_job["revision"]) == ("v1 (weight 1)", "5 (served: 3)")
