"""The ENAS controller: an LSTM that picks one choice per position, trained by REINFORCE.

Pham, Guan, Zoph, Le and Dean, "Efficient Neural Architecture Search via Parameter
Sharing", ICML 2018. The controller reads its previous choice (through an embedding
per position; a learnt start vector at the first) and an output layer per position
turns the LSTM's state into logits, bounded as ENAS does by ``tanh_constant * tanh``.
Every update is REINFORCE on one architecture and its reward, with a moving-average
baseline and an entropy bonus.

This module imports torch; :mod:`baobab.advisor._enas` imports it only when an ENAS
strategy is built, so the advisor package stays importable without torch. Everything
here runs on the CPU in float32, seeded by its own generator, and touches no global
random state: replaying the same updates gives the same bits.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["Controller", "ControllerState", "Reinforce"]


class Controller(nn.Module):
    """An autoregressive policy over ``len(sizes)`` positions, position ``i`` with ``sizes[i]`` choices.

    Args:
        sizes: the number of choices at each position (at least one position).
        hidden: the LSTM's width (ENAS's ``lstm_size``).
        tanh_constant: logits are ``tanh_constant * tanh(raw)``, which keeps every choice's
            probability away from 0 and 1.
        seed: seeds the initial weights (uniform in [-0.1, 0.1], as ENAS).
    """

    def __init__(self, sizes: Sequence[int], *, hidden: int, tanh_constant: float, seed: int) -> None:
        super().__init__()
        self.sizes = tuple(int(n) for n in sizes)
        self.tanh_constant = float(tanh_constant)
        # The layers' own initialisation draws from torch's global generator; fork it so
        # that building a controller leaves the process's random state as it was.
        with torch.random.fork_rng(devices=[]):
            self.start = nn.Parameter(torch.empty(1, hidden))
            self.cell = nn.LSTMCell(hidden, hidden)
            self.embeddings = nn.ModuleList(nn.Embedding(n, hidden) for n in self.sizes[:-1])
            self.heads = nn.ModuleList(nn.Linear(hidden, n) for n in self.sizes)
        generator = torch.Generator().manual_seed(int(seed) % 2**63)
        with torch.no_grad():
            for parameter in self.parameters():
                parameter.uniform_(-0.1, 0.1, generator=generator)

    def _step(
        self, position: int, previous: int | None, state: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Log-probabilities of the choices at ``position`` after ``previous`` was chosen before it."""
        x = self.start if previous is None else self.embeddings[position - 1](torch.tensor([previous]))
        h, c = self.cell(x, state)
        logits = self.tanh_constant * torch.tanh(self.heads[position](h)[0])
        return torch.log_softmax(logits, dim=0), (h, c)

    def log_prob_and_entropy(self, actions: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """The log-probability of ``actions`` and the summed entropy of each position's choice, with gradients."""
        log_prob = torch.zeros(())
        entropy = torch.zeros(())
        state = None
        previous = None
        for position, action in enumerate(actions):
            log_probs, state = self._step(position, previous, state)
            log_prob = log_prob + log_probs[action]
            entropy = entropy - (log_probs.exp() * log_probs).sum()
            previous = int(action)
        return log_prob, entropy

    @torch.no_grad()
    def sample(self, rng: np.random.Generator) -> list[int]:
        """One architecture drawn from the policy, the randomness from ``rng`` only."""
        actions: list[int] = []
        state = None
        for position in range(len(self.sizes)):
            log_probs, state = self._step(position, actions[-1] if actions else None, state)
            cumulative = np.cumsum(log_probs.double().exp().numpy())
            choice = int(np.searchsorted(cumulative / cumulative[-1], rng.random(), side="right"))
            actions.append(min(choice, self.sizes[position] - 1))
        return actions

    @torch.no_grad()
    def beam_search(self, width: int) -> list[tuple[float, list[int]]]:
        """Up to ``width`` likely architectures with their log-probabilities, best first.

        A beam search: at each position every kept prefix is extended by every choice
        and the ``width`` most likely prefixes are kept. Ties go to the smaller choices.
        """
        beams: list[tuple[float, list[int], Any]] = [(0.0, [], None)]
        for position in range(len(self.sizes)):
            candidates = []
            for score, actions, state in beams:
                log_probs, next_state = self._step(position, actions[-1] if actions else None, state)
                for choice, log_prob in enumerate(log_probs.tolist()):
                    candidates.append((score + log_prob, [*actions, choice], next_state))
            beams = heapq.nsmallest(width, candidates, key=lambda c: (-c[0], c[1]))
        return [(score, actions) for score, actions, _ in beams]


@dataclass(frozen=True)
class ControllerState:
    """A deep copy of everything an update changes: weights, optimizer moments, baseline."""

    weights: dict[str, torch.Tensor]
    optimizer: dict[str, Any]
    baseline: float | None


class Reinforce:
    """REINFORCE on a :class:`Controller`, one architecture per update.

    The advantage of a reward is its difference to the baseline, an exponential moving
    average of the previous rewards (``baseline_decay`` is ENAS's ``bl_dec``; the first
    reward starts it, so the first update only follows the entropy bonus). The loss is
    ``-advantage * log_prob - entropy_weight * entropy``, minimised by Adam.
    """

    def __init__(
        self, controller: Controller, *, learning_rate: float, baseline_decay: float, entropy_weight: float
    ) -> None:
        self.controller = controller
        self.baseline_decay = baseline_decay
        self.entropy_weight = entropy_weight
        self.optimizer = torch.optim.Adam(controller.parameters(), lr=learning_rate)
        self.baseline: float | None = None

    def update(self, actions: Sequence[int], reward: float) -> None:
        if self.baseline is None:
            self.baseline = reward
        advantage = reward - self.baseline
        self.baseline = self.baseline_decay * self.baseline + (1 - self.baseline_decay) * reward
        log_prob, entropy = self.controller.log_prob_and_entropy(actions)
        loss = -advantage * log_prob - self.entropy_weight * entropy
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def save(self) -> ControllerState:
        return ControllerState(
            copy.deepcopy(self.controller.state_dict()), copy.deepcopy(self.optimizer.state_dict()), self.baseline
        )

    def load(self, state: ControllerState) -> None:
        # Copies again: Adam updates its moments in place, and the snapshot must survive that.
        self.controller.load_state_dict(state.weights)
        self.optimizer.load_state_dict(copy.deepcopy(state.optimizer))
        self.baseline = state.baseline
