"""Run by the clean virtual environment's Python, not by pytest: one trial through the SDK the wheel installed.

Arguments: the platform's URL, the admin's email and password, the folder of the breast
cancer set (train.csv, val.csv) and the template file. Prints the finished job and its trials as JSON,
with the file the ``baobab`` package was imported from, so the test can tell the wheel's
copy ran and not the checkout's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import baobab
from baobab.sdk import Client

url, email, password, data, template = sys.argv[1:]
client = Client(url)
client.login(email, password)
train = client.create_dataset("bc train", Path(data) / "train.csv", format="TABULAR", target="target")
val = client.create_dataset("bc val", Path(data) / "val.csv", format="TABULAR", target="target")
model = client.create_model(template, task="TABULAR_CLASSIFICATION", class_name="SkTabularClassifier")
job = client.create_train_job(
    "smoke",
    "TABULAR_CLASSIFICATION",
    train_dataset_id=train["id"],
    val_dataset_id=val["id"],
    model_ids=[model["id"]],
    budget={"MODEL_TRIAL_COUNT": 1, "GPU_COUNT": 0},
)
job = client.wait_for_train_job("smoke", job["app_version"], timeout=240, progress=False)
trials = client.get_trials("smoke", job["app_version"])["trials"]  # their errors, should the job fail
print(json.dumps({"baobab": baobab.__file__, "job": job, "trials": trials}))
