"""SkImageClassifier: PCA of the flattened pixels, then k nearest neighbours.

Task IMAGE_CLASSIFICATION. Predictions are class probabilities (the neighbours'
votes), index = class.

Parameters are arrays, not a pickle: the PCA mean and components, and the training
images projected onto them (k-NN keeps its training set, so that is its state).
Loading fits a fresh k-NN on the projections, which only indexes them.
"""

from __future__ import annotations

import numpy as np
from sklearn.decomposition import PCA
from sklearn.neighbors import KNeighborsClassifier

from baobab.model import BaseModel, CategoricalKnob, IntegerKnob
from baobab.store import read_image_files


class SkImageClassifier(BaseModel):
    @staticmethod
    def get_knob_config():
        return {
            "components": CategoricalKnob([16, 32, 64]),
            "neighbors": IntegerKnob(1, 15),
            "weights": CategoricalKnob(["uniform", "distance"]),
        }

    def __init__(self, **knobs) -> None:
        super().__init__(**knobs)
        self.mean = np.zeros(0, np.float32)
        self.components = np.zeros((0, 0), np.float32)
        self.projected = np.zeros((0, 0), np.float32)  # the training images, projected
        self.labels = np.zeros(0, np.int64)
        self.num_classes = 0
        self.classifier = KNeighborsClassifier(n_neighbors=knobs["neighbors"], weights=knobs["weights"])

    def _project(self, images: np.ndarray) -> np.ndarray:
        pixels = np.asarray(images, dtype=np.float32).reshape(len(images), -1) / 255.0
        return (pixels - self.mean) @ self.components.T

    def train(self, dataset_path: str, shared_params=None, *, seed: int = 0) -> None:
        data = read_image_files(dataset_path)
        pixels = data.images.reshape(len(data.images), -1).astype(np.float32) / 255.0
        components = min(self.knobs["components"], *pixels.shape)
        pca = PCA(n_components=components, random_state=seed).fit(pixels)
        # C order, as the components come back from storage: the same layout gives the
        # same floating-point sums, so a reloaded model predicts exactly the same.
        self.mean = pca.mean_.astype(np.float32)
        self.components = np.ascontiguousarray(pca.components_, dtype=np.float32)
        self.num_classes = data.num_classes
        self.projected, self.labels = self._project(data.images), data.labels
        self._fit()

    def _fit(self) -> None:
        # Fewer training images than neighbours: ask for as many as there are.
        self.classifier.set_params(n_neighbors=min(self.knobs["neighbors"], len(self.labels)))
        self.classifier.fit(self.projected, self.labels)

    def evaluate(self, dataset_path: str) -> float:
        data = read_image_files(dataset_path)
        return float(self.classifier.score(self._project(data.images), data.labels))

    def predict(self, queries: list) -> list:
        if not queries:
            return []
        votes = self.classifier.predict_proba(self._project(np.asarray(queries)))
        probabilities = np.zeros((len(votes), self.num_classes))
        probabilities[:, self.classifier.classes_] = votes  # classes absent from training get 0
        return probabilities.tolist()

    def dump_parameters(self):
        return {
            "pca.mean": self.mean,
            "pca.components": self.components,
            "train.projected": self.projected,
            "train.labels": self.labels,
            "num_classes": self.num_classes,
        }

    def load_parameters(self, params) -> None:
        self.mean = np.asarray(params["pca.mean"])
        self.components = np.asarray(params["pca.components"])
        self.num_classes = int(params["num_classes"])
        self.projected = np.asarray(params["train.projected"])
        self.labels = np.asarray(params["train.labels"])
        self._fit()
