"""The main job: upload → train → serve → predict on Fashion-MNIST, through the real platform.

``make demo`` runs this file. It starts ``baobab up`` in a fresh home under
``data/demo``, uploads the datasets and two templates (a PyTorch CNN and a
scikit-learn k-NN) with the SDK, trains both under a budget of a few minutes,
serves the best two trials as one ensemble, sends every test image to the predictor
and prints, last, ``test accuracy: 0.NNNN``. Then it stops the platform.

Run it by hand with ``python examples/demo.py --help``.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import numpy as np

from baobab.sdk import Client
from baobab.store import build_fashion_mnist, read_image_files
from baobab.testing import LocalPlatform

ROOT = Path(__file__).resolve().parent.parent
EMAIL = "demo@example.com"
PASSWORD = "demo-password"
MODELS = (
    ("examples/models/torch_cnn.py", "TorchCnn"),
    ("examples/models/sklearn_images.py", "SkImageClassifier"),
)
BATCH = 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=4000, help="train + validation images (default 4000)")
    parser.add_argument("--minutes", type=float, default=3.0, help="the train job's time budget (default 3)")
    parser.add_argument("--trials", type=int, default=20, help="trials per template at most (default 20)")
    parser.add_argument("--workers", type=int, default=2, help="trials at once (default 2)")
    parser.add_argument("--out", type=Path, default=ROOT / "data" / "demo", help="folder for data and home")
    args = parser.parse_args()

    data = args.out / "fashion-mnist"
    print(f"building Fashion-MNIST ({args.images} train + validation images) in {data}", flush=True)
    build_fashion_mnist(data, limit=args.images, seed=0)
    home = args.out / "home"
    shutil.rmtree(home, ignore_errors=True)  # a fresh platform each run

    settings = {"BAOBAB_ADMIN_EMAIL": EMAIL, "BAOBAB_ADMIN_PASSWORD": PASSWORD}
    with LocalPlatform(home, workers=args.workers, settings=settings) as platform:
        print(f"baobab up at {platform.url}; its log: {platform.log}", flush=True)
        client = Client(platform.url)
        client.login(EMAIL, PASSWORD)
        train = client.create_dataset("fashion-mnist train", data / "train.zip", format="IMAGE_FILES")
        val = client.create_dataset("fashion-mnist val", data / "val.zip", format="IMAGE_FILES")
        models = [
            client.create_model(ROOT / path, task="IMAGE_CLASSIFICATION", class_name=name, access="PUBLIC")
            for path, name in MODELS
        ]
        budget = {"TIME_HOURS": args.minutes / 60, "MODEL_TRIAL_COUNT": args.trials, "GPU_COUNT": 0}
        job = client.create_train_job(
            "fashion-demo",
            "IMAGE_CLASSIFICATION",
            train_dataset_id=train["id"],
            val_dataset_id=val["id"],
            model_ids=[m["id"] for m in models],
            budget=budget,
        )
        print(f"train job fashion-demo v{job['app_version']}: {len(models)} templates, budget {budget}", flush=True)
        job = client.wait_for_train_job("fashion-demo", job["app_version"])
        print(f"train job {job['status']}: trials {job['trial_counts']}, best validation score {job['best_score']}")
        for trial in client.get_best_trials("fashion-demo", job["app_version"], k=2):
            print(f"  best: trial {trial['id']} {trial['model_name']} score {trial['score']:.4f} {trial['knobs']}")

        inference = client.create_inference_job("fashion-demo", job["app_version"], k=2)
        served = client.wait_for_inference_job(inference["id"])
        print(f"serving {len(served['members'])} trials at {served['predictor_url']}", flush=True)
        test = read_image_files(data / "test.zip")
        correct = 0
        for start in range(0, len(test.labels), BATCH):
            queries = test.images[start : start + BATCH].tolist()
            answer = client.predict(queries, predictor_url=served["predictor_url"], api_key=inference["api_key"])
            predicted = np.argmax(np.asarray(answer["predictions"]), axis=1)
            correct += int((predicted == test.labels[start : start + BATCH]).sum())
        client.stop_inference_job(inference["id"])
    print(f"test accuracy: {correct / len(test.labels):.4f}")


if __name__ == "__main__":
    main()
