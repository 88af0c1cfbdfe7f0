"""The tabular experiments of the asymmetric actor-critic paper, as plain functions.

:func:`critic_error_study` measures, for a fixed agent-state policy, how far the averaged m-step TD
critic is from the exact ``Q^pi(s, z, a)`` after a growing number of updates, for the asymmetric
critic ``Q(s, z, a)`` and the symmetric ``Q(z, a)``, next to the aliasing floor (the least error
of any ``(z, a)`` critic). :func:`actor_critic_study` runs natural actor-critic with each critic
and records the exact value ``J(pi_t)`` of every iterate (Lambrechts, Ernst & Mahajan, ICML 2025:
the symmetric bound carries an aliasing term that the asymmetric one does not).

:class:`TabularStudy` is the recipe's study (``studies.tabular`` in ``recipes/asymmetric_ac.yaml``):
after the grid of the neural :class:`AsymmetricActorCritic` on a masked gymnasium task
(asymmetric vs symmetric critic), the linear study of the paper on a T-maze: critic error vs TD
updates with the aliasing floor, and natural actor-critic with each critic, as two tables and two
plots (``critic_error``, ``actor_critic``) that ``ComparisonCLI`` prints, writes and logs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from lab.study import Study, StudyResult
from lightning_info.core.logging import mean_std
from lightning_info.core.plotting import pyplot
from lightning_info.core.validation import require_int
from lightning_info.methods.asymmetric_ac.exact import (
    agent_state_chain,
    critic_error,
    evaluate_policy,
)
from lightning_info.methods.asymmetric_ac.functional import (
    SGDSettings,
    m_step_td,
    natural_actor_critic,
    softmax_policy,
)
from lightning_info.methods.asymmetric_ac.tabular_pomdp import TabularPOMDP, t_maze

KINDS = ("asymmetric", "symmetric")


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(list(key)))


def random_logits(num_agent_states: int, num_actions: int, seed: int, scale: float) -> np.ndarray:
    """``(n_z, A)`` logits drawn ``N(0, scale^2)`` from ``seed``."""
    return scale * _rng(seed).standard_normal((num_agent_states, num_actions))


def critic_error_study(
    pomdp: TabularPOMDP,
    windows: Sequence[int],
    td_steps: Sequence[int],
    updates: Sequence[int],
    gamma: float,
    seeds: Sequence[int],
    batch_size: int = 64,
    step_size: float = 1.0,
    policy_scale: float = 1.0,
) -> list[dict]:
    """Critic error after ``n`` TD updates, per window ``k``, ``m``, critic kind and seed.

    The policy of a seed is a softmax of ``N(0, policy_scale^2)`` logits over the windows; every
    ``n`` is a fresh run (no reuse of samples between points of a curve).

    Returns:
        One row per point: ``kind, window, td_steps, updates, seed, error, floor``.
    """
    rows = []
    for k in windows:
        chain = agent_state_chain(pomdp, require_int(k, "window", 1))
        for seed in seeds:
            logits = random_logits(chain.num_agent_states, chain.num_actions, seed, policy_scale)
            policy = softmax_policy(logits)
            evaluation = evaluate_policy(chain, policy, gamma)
            for m in td_steps:
                for kind_index, kind in enumerate(KINDS):
                    for n in updates:
                        settings = SGDSettings(
                            num_steps=n, batch_size=batch_size, step_size=step_size
                        )
                        rng = _rng(seed, k, m, kind_index, n)
                        q_hat = m_step_td(chain, policy, gamma, kind, rng, m, settings)
                        rows.append(
                            {
                                "kind": kind,
                                "window": k,
                                "td_steps": m,
                                "updates": n,
                                "seed": seed,
                                "error": critic_error(chain, evaluation, q_hat),
                                "floor": evaluation.aliasing_floor,
                            }
                        )
    return rows


def actor_critic_study(
    pomdp: TabularPOMDP,
    windows: Sequence[int],
    td_steps: Sequence[int],
    gamma: float,
    seeds: Sequence[int],
    iterations: int,
    actor_step_size: float,
    critic: SGDSettings,
    actor: SGDSettings,
    initial_scale: float = 0.5,
) -> list[dict]:
    """Exact ``J(pi_t)`` of natural actor-critic with each critic, per window, ``m`` and seed.

    Every seed starts both critics from the same ``N(0, initial_scale^2)`` logits.

    Returns:
        One row per run: ``kind, window, td_steps, seed, values`` (``iterations + 1`` values),
        ``critic_errors`` and ``floors`` (``iterations`` each).
    """
    rows = []
    for k in windows:
        chain = agent_state_chain(pomdp, require_int(k, "window", 1))
        for seed in seeds:
            theta = random_logits(chain.num_agent_states, chain.num_actions, seed, initial_scale)
            for m in td_steps:
                for kind_index, kind in enumerate(KINDS):
                    history = natural_actor_critic(
                        chain,
                        gamma,
                        kind,
                        _rng(seed, k, m, kind_index),
                        iterations,
                        actor_step_size,
                        m=m,
                        critic=critic,
                        actor=actor,
                        theta=theta,
                    )
                    rows.append(
                        {
                            "kind": kind,
                            "window": k,
                            "td_steps": m,
                            "seed": seed,
                            "values": history.values.tolist(),
                            "critic_errors": history.critic_errors.tolist(),
                            "floors": history.aliasing_floors.tolist(),
                        }
                    )
    return rows


def critic_error_table(rows: list[dict]) -> tuple[list[str], list[list]]:
    """Final error (most updates) per window, ``m`` and kind, mean ± std over seeds."""
    last = max(r["updates"] for r in rows)
    columns = ["window k", "m", "asymmetric error", "symmetric error", "aliasing floor"]
    table = []
    for k, m in dict.fromkeys((r["window"], r["td_steps"]) for r in rows):
        cell = {}
        for kind in KINDS:
            errors = [
                r["error"]
                for r in rows
                if (r["window"], r["td_steps"], r["kind"], r["updates"]) == (k, m, kind, last)
            ]
            cell[kind] = mean_std(errors)
        floors = [r["floor"] for r in rows if (r["window"], r["td_steps"]) == (k, m)]
        table.append([k, m, cell["asymmetric"], cell["symmetric"], mean_std(floors)])
    return columns, table


def actor_critic_table(rows: list[dict]) -> tuple[list[str], list[list]]:
    """``J`` at the start and after the last iteration per window, ``m`` and kind."""
    columns = ["window k", "m", "J(pi_0)", "asymmetric J(pi_T)", "symmetric J(pi_T)"]
    table = []
    for k, m in dict.fromkeys((r["window"], r["td_steps"]) for r in rows):
        runs = {
            kind: [r for r in rows if (r["window"], r["td_steps"], r["kind"]) == (k, m, kind)]
            for kind in KINDS
        }
        start = [r["values"][0] for r in runs["asymmetric"]]
        final = {kind: mean_std([r["values"][-1] for r in runs[kind]]) for kind in KINDS}
        table.append([k, m, mean_std(start), final["asymmetric"], final["symmetric"]])
    return columns, table


def plot_critic_errors(rows: list[dict]):
    """Critic error vs TD updates (log-log), one panel per ``m``; floors dashed (a matplotlib
    figure)."""
    plt = pyplot()
    td_steps = sorted({r["td_steps"] for r in rows})
    windows = sorted({r["window"] for r in rows})
    fig, axes = plt.subplots(1, len(td_steps), figsize=(5 * len(td_steps), 4), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, m in zip(axes[0], td_steps):
        for color, k in zip(colors, windows):
            for kind, style in zip(KINDS, ("-", ":")):
                points = [
                    r for r in rows if (r["td_steps"], r["window"], r["kind"]) == (m, k, kind)
                ]
                updates = sorted({r["updates"] for r in points})
                means = [
                    np.mean([r["error"] for r in points if r["updates"] == n]) for n in updates
                ]
                ax.plot(updates, means, style, color=color, marker="o", label=f"{kind}, k={k}")
            floor = np.mean([r["floor"] for r in rows if (r["td_steps"], r["window"]) == (m, k)])
            ax.axhline(floor, color=color, linestyle="--", linewidth=0.8)
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="TD updates",
            ylabel="critic error",
            title=f"m = {m} (dashed: aliasing floor)",
        )
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_actor_critic(rows: list[dict]):
    """``J(pi_t)`` vs iteration, mean over seeds, one panel per window (a matplotlib figure)."""
    plt = pyplot()
    windows = sorted({r["window"] for r in rows})
    td_steps = sorted({r["td_steps"] for r in rows})
    fig, axes = plt.subplots(1, len(windows), figsize=(5 * len(windows), 4), squeeze=False)
    for ax, k in zip(axes[0], windows):
        for m in td_steps:
            for kind, style in zip(KINDS, ("-", ":")):
                runs = [
                    r["values"]
                    for r in rows
                    if (r["window"], r["td_steps"], r["kind"]) == (k, m, kind)
                ]
                ax.plot(np.mean(runs, axis=0), style, marker=".", label=f"{kind}, m={m}")
        ax.set(xlabel="iteration", ylabel="J(pi_t)", title=f"natural actor-critic, k = {k}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


@dataclass
class TabularStudy(Study):
    """The T-maze study: critic error vs TD updates, then natural actor-critic with each critic."""

    corridor_length: int = 1
    sign_accuracy: float = 1.0
    penalty: float = -0.5
    gamma: float = 0.8
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    critic_windows: list[int] = field(default_factory=lambda: [1, 2, 3])
    td_steps: list[int] = field(default_factory=lambda: [1, 4])
    updates: list[int] = field(default_factory=lambda: [25, 100, 400, 1600, 6400])
    batch_size: int = 64
    step_size: float = 1.0
    actor_critic_windows: list[int] = field(default_factory=lambda: [1, 2])
    iterations: int = 10
    actor_step_size: float = 2.0
    critic_updates: int = 1000
    actor_updates: int = 200

    def run(self, cli=None) -> StudyResult:
        maze = t_maze(self.corridor_length, self.sign_accuracy, penalty=self.penalty)
        critic_rows = critic_error_study(
            maze,
            self.critic_windows,
            self.td_steps,
            self.updates,
            self.gamma,
            self.seeds,
            self.batch_size,
            self.step_size,
        )
        actor_rows = actor_critic_study(
            maze,
            self.actor_critic_windows,
            self.td_steps,
            self.gamma,
            self.seeds,
            self.iterations,
            self.actor_step_size,
            SGDSettings(self.critic_updates, self.batch_size, self.step_size),
            SGDSettings(self.actor_updates, self.batch_size, self.step_size),
        )
        critic_title = (
            f"T-maze (gamma {self.gamma}): critic error after {max(self.updates)} TD updates "
            "(mean ± std)"
        )
        actor_title = f"T-maze: J after {self.iterations} natural actor-critic iterations"
        return StudyResult(
            tables={
                critic_title: critic_error_table(critic_rows),
                actor_title: actor_critic_table(actor_rows),
            },
            figures={
                "critic_error": plot_critic_errors(critic_rows),
                "actor_critic": plot_actor_critic(actor_rows),
            },
            records={"config": asdict(self), "critic": critic_rows, "actor_critic": actor_rows},
        )
