"""TorchModel: a BaseModel for PyTorch networks whose training loop the platform owns.

A template gives the network, the data and a few choices (loss, optimizer, epochs);
this class runs the loop. Owning the loop is what lets the platform apply the policies
the same way for every template (train short, evaluate on a sample, build small,
start from shared weights), stop a trial between batches, and later warm-start from
the zoo or batch several trials into one computation.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import numpy as np
import torch

from baobab.model._base import BaseModel, Params, check_params
from baobab.model._context import TrialContext
from baobab.model._knobs import EPOCHS_KNOB, Policy

__all__ = ["TorchModel", "WarmStart", "module_state"]

_STATE_PREFIX = "module."
_META_KEYS = ("downscaled", "input_shape", "output_size", "seed")
_TRAIN_ARG_PREFIX = "train_arg."


class WarmStart(Protocol):
    """What ``TrialContext.warm_starter`` returns (``baobab.zoo.WarmStartResult`` is one)."""

    state: Mapping[str, torch.Tensor]
    lr_scale: float

    def summary(self) -> str: ...


class TorchModel(BaseModel):
    """A template that supplies a ``torch.nn.Module`` and data; the platform trains it.

    Implement :meth:`build_module` and :meth:`load_data` (and ``get_knob_config``);
    override the other hooks where the defaults (a classifier trained with Adam and
    cross-entropy, scored by accuracy) do not fit.

    ``train(dataset_path, shared_params=None, *, seed=None, **train_args)`` calls, in order:

    1. :meth:`load_data` on the training set, then :meth:`preprocess` on its inputs;
       ``self.input_shape`` (one preprocessed input) and ``self.output_size``
       (:meth:`output_size_of` the targets) are set from them.
    2. :meth:`build_module` with ``downscale`` = the ``DOWNSCALE`` policy.
    3. When ``shared_params`` is given: every state-dict entry whose name and shape match
       is copied in, the rest keep their initial values; the count is logged. Otherwise,
       when the platform set ``self.context.warm_starter`` (trials of a job whose option
       ``warm_start`` is not false) and ``SKIP_TRAIN`` is off: the
       warm starter gets the module and the first two training inputs, and its answer
       (the weights of the most similar zoo model, transformed to fit) is loaded; the
       learning rate of the first :meth:`warm_start_epochs` epochs is then scaled by its
       ``lr_scale`` (less the more of the model came from the parent, so the first
       steps do not undo it), and the parent and similarity are logged.
    4. :meth:`fit_module` (set normalisation statistics and the like from the data).
    5. :meth:`make_loss`, :meth:`make_optimizer`; then up to :meth:`epochs` epochs
       (:meth:`early_stop_epochs` under ``EARLY_STOP``, none under ``SKIP_TRAIN``) of
       shuffled mini-batches of :meth:`batch_size`. After each epoch the mean ``loss``
       and the ``train_score`` (:meth:`score` on the training batches) are reported
       through ``self.context.report(epoch, ...)``; a stop request from the context
       ends training between batches.

    ``seed`` (train arg, else a ``seed`` knob, else the seed torch's generator was given,
    which the trial runner sets per trial) seeds initialisation, shuffling, dropout and
    the ``QUICK_EVAL`` sample. The other train args are kept in
    ``self.train_args`` (a tabular template reads its ``target`` there: the job's target
    column, which the platform passes as a train argument); those that
    are JSON scalars are stored with the parameters, so a model loaded elsewhere reads
    its datasets the same way.

    ``evaluate(path)`` calls :meth:`load_data` and :meth:`preprocess` on the whole set,
    and :meth:`score` on it, or under ``QUICK_EVAL`` on a seeded sample of
    :attr:`quick_eval_fraction` of it. A worker decodes and preprocesses each dataset once
    per machine and shares the arrays with its other trials (``context.data_loader``): the
    two hooks must be deterministic functions of the data and of what they read of the
    model (knobs, train args, attributes), and may not run in every trial.
    ``predict(queries)`` calls :meth:`preprocess` on
    ``np.asarray(queries)`` and :meth:`postprocess` on the outputs.

    Parameters are the module's state dict as NumPy arrays under ``module.<name>``,
    plus ``downscaled``, ``input_shape``, ``output_size``, ``seed`` and the train args,
    which with the knobs are all :meth:`load_parameters` needs to rebuild the module.

    Example::

        class Logistic(TorchModel):
            @staticmethod
            def get_knob_config():
                return {"learning_rate": FloatKnob(1e-3, 1e-1, is_exp=True)}

            def build_module(self, downscale):
                return torch.nn.Linear(self.input_shape[0], self.output_size)

            def load_data(self, dataset_path):
                data = read_tabular(dataset_path, target=self.train_args.get("target", "target"))
                return data.features, data.target
    """

    #: Share of the validation set evaluated under ``QUICK_EVAL``.
    quick_eval_fraction: float = 0.1
    #: Rows per forward pass in evaluate and predict (no gradients, so larger than training batches).
    inference_batch_size: int = 1024
    #: Set by a fused run (baobab.model._fused) around ``train()``: it receives the prepared
    #: inputs and targets and trains this trial with others, in place of the loop here.
    _loop_hook: Callable[[torch.Tensor, torch.Tensor], None] | None = None

    def __init__(self, **knobs: Any) -> None:
        super().__init__(**knobs)
        self.module: torch.nn.Module | None = None
        self.downscaled = False
        self.input_shape: tuple[int, ...] = ()
        self.output_size = 0
        self.train_args: dict[str, Any] = {}
        self.seed = 0
        #: The first training inputs (preprocessed): what the zoo traces the module with.
        self.example_input: torch.Tensor | None = None
        self._lr_scale = 1.0

    # -- hooks a template implements ------------------------------------------------

    @abstractmethod
    def build_module(self, downscale: bool) -> torch.nn.Module:
        """The network for ``self.knobs``, ``self.input_shape`` and ``self.output_size``.

        Args:
            downscale: True under the ``DOWNSCALE`` policy: build fewer layers or channels.
        """

    @abstractmethod
    def load_data(self, dataset_path: str) -> tuple[np.ndarray, np.ndarray]:
        """Inputs and targets of the dataset at ``dataset_path``, one row per example."""

    # -- hooks with defaults --------------------------------------------------------

    def preprocess(self, inputs: np.ndarray) -> torch.Tensor:
        """Raw inputs (from :meth:`load_data`, or predict queries) to the network's input."""
        return _to_tensor(inputs, np.float32)

    def output_size_of(self, targets: np.ndarray) -> int:
        """The network's output width: by default the number of classes, ``max label + 1``."""
        return int(np.max(targets)) + 1

    def fit_module(self, module: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        """Fit what is not learnt by gradient (e.g. normalisation buffers); default: nothing."""

    def make_loss(self) -> torch.nn.Module:
        return torch.nn.CrossEntropyLoss()

    def make_optimizer(self, params: Iterator[torch.nn.Parameter]) -> torch.optim.Optimizer:
        """Adam at the ``learning_rate`` knob (1e-3 when the template has none)."""
        return torch.optim.Adam(params, lr=float(self.knobs.get("learning_rate", 1e-3)))

    def epochs(self) -> int:
        """Epochs of a full trial: the ``epochs`` knob, 10 when the template has none."""
        return int(self.knobs.get(EPOCHS_KNOB, 10))

    def early_stop_epochs(self) -> int:
        """Epochs under ``EARLY_STOP``: a quarter of :meth:`epochs`, at least one."""
        return min(self.epochs(), max(1, self.epochs() // 4))

    def warm_start_epochs(self, epochs: int) -> int:
        """Epochs at a scaled learning rate after a warm start: the first quarter, at least one."""
        return max(1, epochs // 4)

    def batch_size(self) -> int:
        """Training batch size: the ``batch_size`` knob, 64 when the template has none."""
        return int(self.knobs.get("batch_size", 64))

    def score(self, outputs: torch.Tensor, targets: torch.Tensor) -> float:
        """Higher is better; by default accuracy of the arg-max class."""
        return float((outputs.argmax(dim=1) == targets).float().mean())

    def postprocess(self, outputs: torch.Tensor) -> list[Any]:
        """One JSON value per row; by default the class probabilities."""
        return torch.softmax(outputs.float(), dim=1).tolist()

    def load_shared(self, module: torch.nn.Module, shared_params: Params) -> str:
        """Start ``module`` from another trial's parameters (``SHARE_PARAMS``); the line to log.

        By default every tensor whose name and shape match is copied.
        """
        state = module.state_dict()
        loaded = 0
        for name, value in module_state(shared_params).items():
            if name in state and value.shape == state[name].shape:
                with torch.no_grad():
                    state[name].copy_(value)
                loaded += 1
        return f"loaded {loaded} of {len(state)} tensors from shared_params"

    def zoo_state(self, zoo_model_id: int) -> dict[str, torch.Tensor]:
        """The module state (state-dict names → tensors) of zoo model ``zoo_model_id``.

        For a template that trains on a zoo model's weights (a frozen base under a searched
        head): only the platform knows which zoo models the trial's owner may see, so it
        reads them through ``self.context.zoo_params``.

        Raises:
            ValueError: no zoo here (``baobab dev test-model``, a notebook), or the platform's
                reason it cannot read that model.
        """
        read = self.context.zoo_params
        if read is None:
            raise ValueError(
                f"{type(self).__name__} needs zoo model {zoo_model_id} and runs only where the platform gives "
                "the trial access to the zoo (a train job), not in `baobab dev test-model` or outside the platform"
            )
        return {name: _to_tensor(value) for name, value in read(zoo_model_id).items()}

    # -- what the platform calls ----------------------------------------------------

    @property
    def device(self) -> torch.device:
        """CUDA when there is a GPU, else the CPU."""
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")

    def train(self, dataset_path: str, shared_params: Params | None = None, **train_args: Any) -> None:
        seed = train_args.pop("seed", self.knobs.get("seed"))
        self.seed = torch.initial_seed() % 2**63 if seed is None else int(seed)
        self.train_args = dict(train_args)
        torch.manual_seed(self.seed)
        inputs, raw_targets = self._dataset(dataset_path)
        targets = _to_tensor(raw_targets)
        if len(inputs) != len(targets):
            raise ValueError(f"load_data() gave {len(inputs)} inputs but {len(targets)} targets")
        if len(inputs) == 0:
            raise ValueError(f"{dataset_path}: no examples to train on")
        self.input_shape = tuple(inputs.shape[1:])
        self.output_size = self.output_size_of(np.asarray(raw_targets))
        self.downscaled = self.policy(Policy.DOWNSCALE)
        self.example_input = inputs[:2].clone()  # a copy: a view would keep every input alive
        module = self.build_module(self.downscaled).to(self.device)
        self.module = module
        self._lr_scale = 1.0
        if shared_params is not None:
            self.context.log(self.load_shared(module, shared_params))
        elif not self.policy(Policy.SKIP_TRAIN):
            self._warm_start(module)
        self.fit_module(module, inputs, targets)
        if self._loop_hook is not None:
            self._loop_hook(inputs, targets)
        else:
            self._fit(module, inputs, targets)

    def _warm_start(self, module: torch.nn.Module) -> None:
        starter = self.context.warm_starter
        if starter is None or self.example_input is None:
            return
        result: WarmStart | None = starter(module, self.example_input.to(self.device))
        if result is None:
            return
        module.load_state_dict(result.state)
        self._lr_scale = float(result.lr_scale)
        self.context.log(f"{result.summary()}; learning rate x{self._lr_scale:.2f} at first")

    def _fit(self, module: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        if self.policy(Policy.SKIP_TRAIN):
            return
        loss_fn = self.make_loss()
        optimizer = self.make_optimizer(module.parameters())
        generator = torch.Generator().manual_seed(self.seed)
        context = self.context
        base_lrs = [group.get("lr") for group in optimizer.param_groups]
        for epoch, lr_scale in enumerate(self._lr_scales()):
            _scale_lrs(optimizer, base_lrs, lr_scale)
            module.train()
            meter = _EpochMeter()
            for batch in _batches(len(inputs), self.batch_size(), generator):
                if context.should_stop:
                    _log_stop(context, "in", epoch)
                    return
                x, y = inputs[batch].to(self.device), targets[batch].to(self.device)
                meter.add(*self._step(module, loss_fn, optimizer, x, y), len(batch))
            if meter.report(context, epoch):
                _log_stop(context, "after", epoch)
                return

    def _step(
        self,
        module: torch.nn.Module,
        loss_fn: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        x: torch.Tensor,
        y: torch.Tensor,
    ) -> tuple[float, float]:
        """One batch of the unfused loop: the loss and the train score (packing times it against a stack's step)."""
        optimizer.zero_grad()
        outputs = module(x)
        loss = loss_fn(outputs, y)
        loss.backward()
        optimizer.step()
        return loss.item(), self.score(outputs.detach(), y)

    def _lr_scales(self) -> list[float]:
        """One learning-rate factor per epoch to train (by the policies): the warm start's for the first few."""
        epochs = self.early_stop_epochs() if self.policy(Policy.EARLY_STOP) else self.epochs()
        gentle = self.warm_start_epochs(epochs) if self._lr_scale != 1.0 else 0
        return [self._lr_scale if epoch < gentle else 1.0 for epoch in range(epochs)]

    def evaluate(self, dataset_path: str) -> float:
        module = self._require_module()
        inputs, targets = self._dataset(dataset_path)
        if self.policy(Policy.QUICK_EVAL):
            size = max(1, math.ceil(self.quick_eval_fraction * len(targets)))
            rows = np.sort(np.random.default_rng(self.seed).choice(len(targets), size, replace=False))
            inputs, targets = inputs[torch.from_numpy(rows)], targets[rows]
        outputs = self._forward(module, inputs)
        return self.score(outputs, _to_tensor(targets))

    def _dataset(self, dataset_path: str) -> tuple[torch.Tensor, np.ndarray]:
        """Preprocessed inputs and the targets of a dataset, through ``self.context.data_loader`` when the
        platform set one (a worker maps them from a cache the trials of its machine share).

        The whole set is preprocessed, and QUICK_EVAL samples rows afterwards: ``preprocess``
        must treat rows independently, as ``predict`` on any batch of queries already needs.
        """

        def load() -> tuple[torch.Tensor | np.ndarray, np.ndarray]:
            raw_inputs, raw_targets = self.load_data(dataset_path)
            return _shareable(self.preprocess(raw_inputs)), np.asarray(raw_targets)

        loader = self.context.data_loader
        inputs, targets = load() if loader is None else loader(dataset_path, load)
        return inputs if isinstance(inputs, torch.Tensor) else torch.from_numpy(inputs), targets

    def predict(self, queries: list[Any]) -> list[Any]:
        module = self._require_module()
        if len(queries) == 0:
            return []
        return self.postprocess(self._forward(module, self.preprocess(np.asarray(queries))))

    def _forward(self, module: torch.nn.Module, inputs: torch.Tensor) -> torch.Tensor:
        module.eval()
        with torch.no_grad():
            chunks = [
                module(inputs[i : i + self.inference_batch_size].to(self.device)).cpu()
                for i in range(0, len(inputs), self.inference_batch_size)
            ]
        return torch.cat(chunks)

    def dump_parameters(self) -> Params:
        module = self._require_module()
        params: Params = {_STATE_PREFIX + name: _to_numpy(t) for name, t in module.state_dict().items()}
        params["downscaled"] = self.downscaled
        params["input_shape"] = np.asarray(self.input_shape, dtype=np.int64)
        params["output_size"] = self.output_size
        params["seed"] = self.seed
        for name, value in self.train_args.items():
            if isinstance(value, (str, int, float, bool)):
                params[_TRAIN_ARG_PREFIX + name] = value
        return params

    def load_parameters(self, params: Params) -> None:
        check_params(params)
        missing = [key for key in _META_KEYS if key not in params]
        if missing:
            raise ValueError(f"parameters lack {', '.join(missing)}; were they written by a TorchModel?")
        self.downscaled = bool(params["downscaled"])
        self.input_shape = tuple(int(n) for n in np.asarray(params["input_shape"]).reshape(-1))
        self.output_size = int(params["output_size"])
        self.seed = int(params["seed"])
        self.train_args = {
            key[len(_TRAIN_ARG_PREFIX) :]: value for key, value in params.items() if key.startswith(_TRAIN_ARG_PREFIX)
        }
        module = self.build_module(self.downscaled)
        try:
            module.load_state_dict(module_state(params), strict=True)
        except RuntimeError as e:
            raise ValueError(f"parameters do not fit the module built from these knobs: {e}") from None
        self.module = module.to(self.device)

    def teardown(self) -> None:
        self.module = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def _require_module(self) -> torch.nn.Module:
        if self.module is None:
            raise RuntimeError(f"{type(self).__name__} has no module yet; call train() or load_parameters() first")
        return self.module


def _batches(count: int, batch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
    """Shuffled index batches; a last batch of one joins the one before (BatchNorm needs two)."""
    if batch_size < 1:
        raise ValueError(f"batch_size() must be at least 1, got {batch_size}")
    order = torch.randperm(count, generator=generator)
    batches = list(torch.split(order, batch_size))
    if len(batches) > 1 and len(batches[-1]) == 1:
        batches[-2:] = [torch.cat(batches[-2:])]
    return batches


class _EpochMeter:
    """An epoch's mean loss and train score over its batches, weighted by their rows."""

    def __init__(self) -> None:
        self.loss, self.score, self.rows = 0.0, 0.0, 0

    def add(self, loss: float, score: float, rows: int) -> None:
        self.loss += loss * rows
        self.score += score * rows
        self.rows += rows

    def report(self, context: TrialContext, epoch: int) -> bool:
        """Report the epoch; True when the platform asks the trial to stop."""
        return context.report(epoch, loss=self.loss / self.rows, train_score=self.score / self.rows)


def _log_stop(context: TrialContext, where: str, epoch: int) -> None:
    context.log(f"stopped {where} epoch {epoch}: {context.stop_reason}")


def _scale_lrs(optimizer: torch.optim.Optimizer, base_lrs: list[Any], scale: float) -> None:
    for group, lr in zip(optimizer.param_groups, base_lrs, strict=True):
        if isinstance(lr, (int, float)):
            group["lr"] = lr * scale


def module_state(params: Params) -> dict[str, torch.Tensor]:
    """The module's state dict held in parameters written by :meth:`TorchModel.dump_parameters`."""
    return {
        key[len(_STATE_PREFIX) :]: _to_tensor(value)
        for key, value in params.items()
        if key.startswith(_STATE_PREFIX) and isinstance(value, np.ndarray)
    }


def _shareable(inputs: torch.Tensor) -> torch.Tensor | np.ndarray:
    """Preprocessed inputs as a NumPy array on their memory (what a data loader can keep), where NumPy
    can hold them; a GPU tensor, one that needs gradients or a dtype NumPy lacks stays a tensor."""
    if not isinstance(inputs, torch.Tensor) or inputs.device.type != "cpu" or inputs.requires_grad:
        return inputs
    try:
        return inputs.numpy()
    except TypeError:  # bfloat16 and the like
        return inputs


def _to_tensor(values: Any, dtype: type | None = None) -> torch.Tensor:
    """A tensor on a copy: dataset arrays are read-only and shared by every trial in the process."""
    return torch.from_numpy(np.array(values, dtype=dtype))


def _to_numpy(tensor: torch.Tensor) -> np.ndarray:
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:  # NumPy has no bfloat16
        tensor = tensor.float()
    return tensor.numpy().copy()
