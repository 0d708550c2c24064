"""A template that prints what its launch was given: OMP_NUM_THREADS, numpy's BLAS threads, its data limit (MiB)."""

import os
import resource

import numpy as np
from threadpoolctl import threadpool_info

from baobab.model import BaseModel, FloatKnob


class LaunchProbe(BaseModel):
    @staticmethod
    def get_knob_config():
        return {"x": FloatKnob(0.0, 1.0)}

    def train(self, dataset_path, shared_params=None, **train_args):
        blas = max((pool["num_threads"] for pool in threadpool_info()), default=0)
        soft, hard = (v // 2**20 for v in resource.getrlimit(resource.RLIMIT_DATA))
        print(f"launch threads={os.environ.get('OMP_NUM_THREADS')} blas={blas} memory_mb={soft}/{hard}")

    def evaluate(self, dataset_path):
        return self.knobs["x"]

    def predict(self, queries):
        return [self.knobs["x"] for _ in queries]

    def dump_parameters(self):
        return {"x": np.array([self.knobs["x"]])}

    def load_parameters(self, params):
        pass
