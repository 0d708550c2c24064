"""SkTabularClassifier: standardised features into scikit-learn's logistic regression.

Task TABULAR_CLASSIFICATION. The target column is the job's ``target``, which train() receives as
``target`` (default "target"). Predictions are class labels as the CSV wrote them.

Parameters are the scaler's and the regression's fitted arrays, not a pickle: loading
sets them on fresh estimators, which is all that ``transform`` and ``predict`` read.
"""

from __future__ import annotations

import json

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from baobab.model import BaseModel, CategoricalKnob, FixedKnob, FloatKnob
from baobab.store import read_tabular


class SkTabularClassifier(BaseModel):
    @staticmethod
    def get_knob_config():
        return {
            "C": FloatKnob(1e-3, 1e2, is_exp=True),
            "class_weight": CategoricalKnob([None, "balanced"]),
            "fit_intercept": CategoricalKnob([True, False]),
            "max_iter": FixedKnob(500),
        }

    def __init__(self, **knobs) -> None:
        super().__init__(**knobs)
        self.scaler = StandardScaler()
        self.classifier = LogisticRegression(
            C=knobs["C"],
            class_weight=knobs["class_weight"],
            fit_intercept=knobs["fit_intercept"],
            max_iter=knobs["max_iter"],
        )
        self.target = "target"
        self.classes: list[str] | None = None  # label names of a string target, in index order

    def train(self, dataset_path: str, shared_params=None, *, target: str = "target", seed: int = 0) -> None:
        self.target = target
        self.classifier.set_params(random_state=seed)
        data = read_tabular(dataset_path, target=target)
        self.classes = list(data.classes) if data.classes is not None else None
        self.classifier.fit(self.scaler.fit_transform(data.features), data.target)

    def evaluate(self, dataset_path: str) -> float:
        data = read_tabular(dataset_path, target=self.target, classes=self.classes)
        return float(self.classifier.score(self.scaler.transform(data.features), data.target))

    def predict(self, queries: list) -> list:
        if not queries:
            return []
        labels = self.classifier.predict(self.scaler.transform(np.asarray(queries, dtype=np.float64))).tolist()
        return [self.classes[i] for i in labels] if self.classes is not None else labels

    def dump_parameters(self):
        return {
            "scaler.mean": self.scaler.mean_,
            "scaler.scale": self.scaler.scale_,
            "coef": self.classifier.coef_,
            "intercept": self.classifier.intercept_,
            "labels": self.classifier.classes_,
            "target": self.target,
            "classes": json.dumps(self.classes),
        }

    def load_parameters(self, params) -> None:
        mean, scale = np.asarray(params["scaler.mean"]), np.asarray(params["scaler.scale"])
        self.scaler.mean_, self.scaler.scale_ = mean, scale
        self.scaler.var_ = scale**2
        self.scaler.n_features_in_ = len(mean)
        self.classifier.coef_ = np.asarray(params["coef"])
        self.classifier.intercept_ = np.asarray(params["intercept"])
        self.classifier.classes_ = np.asarray(params["labels"])
        self.classifier.n_features_in_ = len(mean)
        self.target = params["target"]
        self.classes = json.loads(params["classes"])
