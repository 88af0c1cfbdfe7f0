"""The synthetic latent-type world and its exact Bayesian predictive model.

An entity has a latent type ``z ~ Categorical(prior)`` among ``K``; its answer to question ``q``
is ``y ~ Categorical(theta[z, q])`` among ``A``, independently given ``z``. Each ``theta[k, q]``
is drawn from a symmetric Dirichlet (``concentration`` below 1: peaked, yet noisy answers); the
last ``uninformative`` questions are answered uniformly at random whatever the type: their answers
are the most uncertain of all and say nothing about the type (the trap of choosing the question
with the most uncertain answer).

:class:`ExactPosteriorModel` is this world's posterior predictive,
``p(y | C, q) = sum_k p(k | C) theta[k, q, y]`` with ``p(k | C) ∝ prior_k prod_{(q', y') in C}
theta[k, q', y']``: the predictive interface of ``functional.py`` computed exactly, in float64.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from lightning_info.core.validation import require_int, require_positive

__all__ = ["EmpiricalPredictiveModel", "ExactPosteriorModel", "LatentTypeWorld"]


@dataclass(frozen=True)
class LatentTypeWorld:
    """``prior (K,)`` and ``theta (K, Q, A)``, float64."""

    prior: Tensor
    theta: Tensor

    @classmethod
    def sample(
        cls,
        num_types: int = 4,
        num_questions: int = 12,
        num_answers: int = 3,
        concentration: float = 0.3,
        uninformative: int = 0,
        seed: int = 0,
    ) -> LatentTypeWorld:
        num_types = require_int(num_types, "num_types", 1)
        num_questions = require_int(num_questions, "num_questions", 1)
        num_answers = require_int(num_answers, "num_answers", 1)
        concentration = require_positive(concentration, "concentration")
        if require_int(uninformative, "uninformative", 0) > num_questions:
            raise ValueError(f"uninformative must be in [0, {num_questions}]")
        rng = np.random.default_rng(require_int(seed, "seed", 0))
        alpha = np.full(num_answers, float(concentration))
        theta = torch.as_tensor(rng.dirichlet(alpha, size=(num_types, num_questions)))
        if uninformative:
            theta[:, num_questions - uninformative :] = 1.0 / num_answers
        prior = torch.full((num_types,), 1.0 / num_types, dtype=torch.float64)
        return cls(prior, theta)

    @property
    def num_questions(self) -> int:
        return self.theta.shape[1]

    @property
    def num_answers(self) -> int:
        return self.theta.shape[2]

    def sample_entities(self, count: int, seed: int = 0) -> tuple[Tensor, Tensor]:
        """``(types (count,), answers (count, Q))`` of ``count`` entities."""
        g = torch.Generator().manual_seed(seed)
        types = torch.multinomial(self.prior, count, replacement=True, generator=g)
        probs = self.theta[types].reshape(-1, self.num_answers)
        answers = torch.multinomial(probs, 1, generator=g).view(count, self.num_questions)
        return types, answers


class ExactPosteriorModel:
    """The exact posterior predictive of a :class:`LatentTypeWorld` (module docstring)."""

    def __init__(self, world: LatentTypeWorld):
        self.world = world
        self.num_answers = world.num_answers
        self.num_questions = world.num_questions

    def posterior(self, contexts: Sequence[Sequence[tuple[int, int]]]) -> Tensor:
        """``p(k | C)`` per context, ``(len(contexts), K)``."""
        log_theta = torch.log(self.world.theta)
        rows = []
        for context in contexts:
            log_p = torch.log(self.world.prior).clone()
            for q, y in context:
                log_p = log_p + log_theta[:, q, y]
            rows.append(torch.softmax(log_p, dim=0))
        return torch.stack(rows)

    def predictive(
        self, contexts: Sequence[Sequence[tuple[int, int]]], questions: Sequence[int]
    ) -> Tensor:
        """``p(Y_q | C)``, ``(len(contexts), len(questions), A)``."""
        posterior = self.posterior(contexts)
        return torch.einsum("bk,kqa->bqa", posterior, self.world.theta[:, list(questions)])


class EmpiricalPredictiveModel:
    """The predictive of a world known only through example entities: ``p(y | C, q)`` is the
    frequency of answer ``y`` to ``q`` among the ``answers (N, Q)`` rows that agree with every
    answer in ``C`` (rows without an answer to ``q`` skipped), with ``smoothing`` pseudo-counts
    per answer (``-1`` marks a missing answer). It is the Bayes predictive of the empirical
    distribution of the rows, the reference on a world without a known latent structure (the
    digits); with few matching rows it falls back towards uniform through the pseudo-counts."""

    def __init__(self, answers: Tensor, num_answers: int, smoothing: float = 1.0):
        if answers.dim() != 2 or answers.shape[0] == 0:
            raise ValueError(f"answers must be (entities, questions), got {tuple(answers.shape)}")
        self.num_answers = require_int(num_answers, "num_answers", 1)
        if answers.is_floating_point() or answers.is_complex() or answers.dtype == torch.bool:
            raise TypeError(f"answers must be integer answer indices, got {answers.dtype}")
        if bool(((answers < -1) | (answers >= self.num_answers)).any()):
            raise ValueError(
                f"answers must be in 0..{self.num_answers - 1}, or -1 where unanswered"
            )
        self.smoothing = require_positive(smoothing, "smoothing")  # keeps every answer possible
        self.num_questions = answers.shape[1]
        self.one_hot = torch.stack(
            [(answers == a).double() for a in range(self.num_answers)], dim=-1
        )  # (N, Q, A)

    def predictive(
        self, contexts: Sequence[Sequence[tuple[int, int]]], questions: Sequence[int]
    ) -> Tensor:
        """``p(Y_q | C)``, ``(len(contexts), len(questions), A)``."""
        rows = []
        for context in contexts:
            match = torch.ones(self.one_hot.shape[0], dtype=torch.float64)
            for q, y in context:
                match = match * self.one_hot[:, q, y]
            counts = torch.einsum("n,nqa->qa", match, self.one_hot[:, list(questions)])
            rows.append(counts + self.smoothing)
        stacked = torch.stack(rows)
        return stacked / stacked.sum(-1, keepdim=True)
