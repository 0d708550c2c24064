"""SgdTabular: a linear classifier trained epoch by epoch, reporting interim metrics and logs.

Small and fast (breast_cancer trains in well under a second), so that a browser test can
watch a real job with real interim-metric curves finish in seconds.
"""

import numpy as np
from sklearn.linear_model import SGDClassifier
from sklearn.preprocessing import StandardScaler

from baobab.model import BaseModel, CategoricalKnob, FloatKnob, IntegerKnob, PolicyKnob
from baobab.store import read_tabular


class SgdTabular(BaseModel):
    @staticmethod
    def get_knob_config():
        return {
            "alpha": FloatKnob(1e-5, 1e-1, is_exp=True),
            "epochs": IntegerKnob(3, 8),
            "loss": CategoricalKnob(["hinge", "log_loss"]),
            "early_stop": PolicyKnob("EARLY_STOP"),
        }

    def __init__(self, **knobs):
        super().__init__(**knobs)
        self.scaler = StandardScaler()
        self.classifier = SGDClassifier(alpha=knobs["alpha"], loss=knobs["loss"])
        self.target = "target"

    def train(self, dataset_path, shared_params=None, *, target="target", seed=0):
        self.target = target
        self.classifier.set_params(random_state=seed)
        data = read_tabular(dataset_path, target=target)
        features = self.scaler.fit_transform(data.features)
        classes = np.unique(data.target)
        epochs = 2 if self.knobs["early_stop"] else self.knobs["epochs"]
        for epoch in range(epochs):
            self.classifier.partial_fit(features, data.target, classes=classes)
            accuracy = float(self.classifier.score(features, data.target))
            self.context.log(f"epoch {epoch}: train accuracy {accuracy:.4f}")
            if self.context.report(epoch, train_accuracy=accuracy, error=1.0 - accuracy):
                break

    def evaluate(self, dataset_path):
        data = read_tabular(dataset_path, target=self.target)
        return float(self.classifier.score(self.scaler.transform(data.features), data.target))

    def predict(self, queries):
        rows = np.asarray(queries, dtype=np.float64)
        return [int(label) for label in self.classifier.predict(self.scaler.transform(rows))]

    def dump_parameters(self):
        return {
            "mean": self.scaler.mean_,
            "scale": self.scaler.scale_,
            "coef": self.classifier.coef_,
            "intercept": self.classifier.intercept_,
            "classes": self.classifier.classes_,
        }

    def load_parameters(self, params):
        self.scaler.mean_ = np.asarray(params["mean"])
        self.scaler.scale_ = np.asarray(params["scale"])
        self.scaler.var_ = self.scaler.scale_**2
        self.scaler.n_features_in_ = len(self.scaler.mean_)
        self.classifier.coef_ = np.asarray(params["coef"])
        self.classifier.intercept_ = np.asarray(params["intercept"])
        self.classifier.classes_ = np.asarray(params["classes"])
        self.classifier.n_features_in_ = len(self.scaler.mean_)
