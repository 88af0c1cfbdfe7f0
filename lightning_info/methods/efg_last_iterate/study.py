"""The last-iterate recipe's study: the virtual-transition learner against IX-OMD and Balanced
OMD under bandit feedback, with the same episode budget, on each game.

Rates are tuned per game and method as the reference tunes them: each multiplier in
``multipliers`` scales the method's default ``eta`` and ``gamma`` together
(:data:`~lightning_info.methods.efg_last_iterate.solver.DEFAULT_RATES`), and the
virtual-transition method also tries each regularisation weight in ``taus``; one run per setting
on ``tuning_seed`` (a seed not among ``seeds``; the reference tunes on one of its seeds) plays
the full budget, and the lowest final NashConv picks the multiplier. Then for every game x
method x seed one :class:`~lightning_info.methods.efg_last_iterate.solver.TabularSolver` plays
``episodes[game]`` episodes in batches of ``batch_size`` and records the last iterate's
NashConv at ``evaluations`` log-spaced episode counts. The tables give the NashConv at the
final budget (mean ± std over seeds) and the slope of ``log NashConv`` against ``log episodes``
fitted over the evaluations from ``fit_from`` of the budget on (the paper's rate is ``-1/8``).
CFR from OpenSpiel (``pyspiel.CFRSolver``, full feedback: every iteration walks the whole
tree) after ``cfr_iterations[game]`` iterations is the reference line, for its average and its
current policy. The figure plots NashConv against episodes on log-log axes, one panel per game.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lightning_info.core.logging import mean_std
from lightning_info.core.plotting import pyplot
from lightning_info.experiments.study import Study, StudyResult, run_jobs
from lightning_info.methods.efg_last_iterate.functional import METHODS
from lightning_info.methods.efg_last_iterate.game import game_tree, load_game
from lightning_info.methods.efg_last_iterate.solver import DEFAULT_RATES, TabularSolver

NAMES = {
    "virtual_transition": "virtual-transition OMD (ours)",
    "ix_omd": "IX-OMD",
    "balanced_omd": "Balanced OMD",
}


def evaluation_points(budget: int, batch_size: int, count: int) -> list[int]:
    """``count`` log-spaced episode counts from one batch to ``budget``, on batch
    boundaries, ascending and distinct."""
    steps = np.unique(np.round(np.geomspace(1, budget // batch_size, count)).astype(int))
    return [int(s) * batch_size for s in steps]


def fitted_slope(episodes: list[int], nash_conv: list[float], start: float) -> float:
    """Least-squares slope of ``log NashConv`` on ``log episodes`` over the points with
    ``episodes >= start``."""
    x = np.log([e for e in episodes if e >= start])
    y = np.log([v for e, v in zip(episodes, nash_conv) if e >= start])
    return float(np.polyfit(x, y, 1)[0])


def run_learner(job: dict[str, Any]) -> dict[str, Any]:
    """One method on one game and seed: NashConv of the last iterate at the evaluations."""
    import torch

    torch.set_num_threads(1)
    rates = DEFAULT_RATES[job["method"]]
    solver = TabularSolver(
        game_tree(job["game"]),
        job["method"],
        eta=rates["eta"] * job["multiplier"],
        gamma=rates["gamma"] * job["multiplier"],
        tau=job["tau"],
        seed=job["seed"],
    )
    curve = []
    for target in job["points"]:
        while solver.episodes < target:
            solver.step(job["batch_size"])
        curve.append(solver.nash_conv())
    return {**job, "nash_conv": curve}


def run_cfr(job: dict[str, Any]) -> dict[str, Any]:
    """OpenSpiel's CFR (C++) for ``iterations``: NashConv of its average and current policy."""
    import pyspiel

    game = load_game(job["game"])
    solver = pyspiel.CFRSolver(game)
    for _ in range(job["iterations"]):
        solver.evaluate_and_update_policy()
    return {
        **job,
        "average": float(pyspiel.nash_conv(game, solver.average_policy())),
        "current": float(pyspiel.nash_conv(game, solver.current_policy())),
    }


@dataclass
class LastIterateStudy(Study):
    """The methods side by side at the same episode budget (module docstring).

    Args:
        games: ``pyspiel.load_game`` strings.
        methods: learners to run.
        seeds: episode seeds.
        episodes: the episode budget per game.
        batch_size: episodes per update.
        evaluations: NashConv evaluations per run (log-spaced).
        fit_from: the slope is fitted over evaluations from this share of the budget on.
        multipliers: the tuning grid of rate multipliers.
        taus: the tuning grid of the virtual-transition method's ``tau`` (a single
            multiplier and ``tau``: no tuning).
        tuning_seed: the seed of the tuning runs.
        cfr_iterations: CFR iterations per game (0: no reference line).
        workers: processes running runs side by side.
    """

    games: list[str] = field(default_factory=lambda: ["kuhn_poker", "leduc_poker"])
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    episodes: dict[str, int] = field(
        default_factory=lambda: {"kuhn_poker": 2_000_000, "leduc_poker": 1_000_000}
    )
    batch_size: int = 256
    evaluations: int = 25
    fit_from: float = 0.01
    multipliers: list[float] = field(default_factory=lambda: [0.1, 1.0, 10.0])
    taus: list[float] = field(default_factory=lambda: [0.01, 0.1])
    tuning_seed: int = 1000
    cfr_iterations: dict[str, int] = field(
        default_factory=lambda: {"kuhn_poker": 1000, "leduc_poker": 200}
    )
    workers: int = 1

    def __post_init__(self) -> None:
        if not (self.games and self.methods and self.seeds):
            raise ValueError("`games`, `methods` and `seeds` must be non-empty.")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise ValueError(f"unknown methods {unknown}: choose from {METHODS}.")
        missing = [g for g in self.games if g not in self.episodes]
        if missing:
            raise ValueError(f"`episodes` gives no budget for {missing}.")
        for game in self.games:
            load_game(game)  # refuses an unsupported game before any run
            if self.episodes[game] < 2 * self.batch_size:
                raise ValueError(
                    f"the budget of {game} ({self.episodes[game]}) must hold at least two "
                    f"batches of {self.batch_size} episodes."
                )
        if not self.multipliers or min(self.multipliers) <= 0:
            raise ValueError(f"`multipliers` must be positive, got {self.multipliers}.")
        if not self.taus or min(self.taus) < 0:
            raise ValueError(f"`taus` must be non-negative, got {self.taus}.")
        if self.tuning_seed in self.seeds and self._grid_size("virtual_transition") > 1:
            raise ValueError("`tuning_seed` must not be one of `seeds`: tune on another seed.")
        if not 0 < self.fit_from < 1:
            raise ValueError(f"`fit_from` must be in (0, 1), got {self.fit_from}.")

    def _job(self, game: str, method: str, seed: int, rates: tuple[float, float]):
        points = evaluation_points(self.episodes[game], self.batch_size, self.evaluations)
        return {
            "game": game,
            "method": method,
            "seed": seed,
            "multiplier": rates[0],
            "tau": rates[1],
            "batch_size": self.batch_size,
            "points": points,
        }

    def _grid(self, method: str) -> list[tuple[float, float]]:
        taus = self.taus if method == "virtual_transition" else [0.0]
        return [(x, tau) for tau in taus for x in self.multipliers]

    def _grid_size(self, method: str) -> int:
        return len(self._grid(method))

    def _tune(self) -> tuple[dict[tuple[str, str], tuple[float, float]], list[dict[str, Any]]]:
        settings = [(g, m) for g in self.games for m in self.methods]
        if all(self._grid_size(m) == 1 for m in self.methods):
            return {(g, m): self._grid(m)[0] for g, m in settings}, []
        jobs = [self._job(g, m, self.tuning_seed, r) for g, m in settings for r in self._grid(m)]
        runs = run_jobs(
            run_learner,
            jobs,
            self.workers,
            lambda r: (
                f"tuning {r['game']} {NAMES[r['method']]} x{r['multiplier']:g} "
                f"tau {r['tau']:g}: NashConv {r['nash_conv'][-1]:.4f}"
            ),
        )
        chosen = {}
        for game, method in settings:
            tried = [r for r in runs if (r["game"], r["method"]) == (game, method)]
            best = min(tried, key=lambda r: r["nash_conv"][-1])
            chosen[game, method] = (best["multiplier"], best["tau"])
        return chosen, runs

    def run(self, cli=None) -> StudyResult:
        chosen, tuning = self._tune()
        jobs = [
            self._job(game, method, seed, chosen[game, method])
            for game in self.games
            for method in self.methods
            for seed in self.seeds
        ]

        def describe(r: dict[str, Any]) -> str:
            return (
                f"{r['game']} {NAMES[r['method']]} seed={r['seed']}: NashConv "
                f"{r['nash_conv'][-1]:.4f} after {r['points'][-1]:,} episodes"
            )

        records = run_jobs(run_learner, jobs, self.workers, describe)
        cfr_jobs = [
            {"game": g, "iterations": self.cfr_iterations[g]}
            for g in self.games
            if self.cfr_iterations.get(g, 0) > 0
        ]
        cfr = run_jobs(
            run_cfr,
            cfr_jobs,
            self.workers,
            lambda r: f"CFR {r['game']} x{r['iterations']}: average {r['average']:.4f}",
        )
        for r in records:
            start = self.fit_from * r["points"][-1]
            r["slope"] = fitted_slope(r["points"], r["nash_conv"], start)
        tables = {"last-iterate NashConv at the final budget": self._table(records, cfr)}
        tables[f"fitted slope of log NashConv on log episodes (from {self.fit_from:.0%})"] = (
            self._slopes(records)
        )
        if tuning:
            tables["tuning: final NashConv on the tuning seed per rate multiplier"] = (
                self._tuning_table(tuning, chosen)
            )
        return StudyResult(
            tables,
            {"nash_conv": self._figure(records, cfr)},
            {"runs": records, "cfr": cfr, "tuning": tuning},
        )

    def _tuning_table(self, tuning, chosen):
        columns = ["game", "method", "tau", *(f"x{x:g}" for x in self.multipliers), "chosen"]
        rows = []
        for game in self.games:
            for method in self.methods:
                taus = sorted({tau for _, tau in self._grid(method)})
                for tau in taus:
                    cells = [
                        f"{r['nash_conv'][-1]:.4f}"
                        for x in self.multipliers
                        for r in tuning
                        if (r["game"], r["method"], r["multiplier"], r["tau"])
                        == (game, method, x, tau)
                    ]
                    multiplier, best_tau = chosen[game, method]
                    mark = f"x{multiplier:g}" if best_tau == tau else ""
                    rows.append([game, NAMES[method], f"{tau:g}", *cells, mark])
        return columns, rows

    def _runs(self, records, game, method):
        return [r for r in records if r["game"] == game and r["method"] == method]

    def _table(self, records, cfr):
        columns = [
            "game",
            "episodes",
            *(NAMES[m] for m in self.methods),
            "CFR average (full feedback)",
            "CFR current",
        ]
        rows = []
        for game in self.games:
            cells = [
                mean_std([r["nash_conv"][-1] for r in self._runs(records, game, m)])
                for m in self.methods
            ]
            line = next((c for c in cfr if c["game"] == game), None)
            reference = (
                ["-", "-"]
                if line is None
                else [f"{line['average']:.4f} ({line['iterations']} it.)", f"{line['current']:.4f}"]
            )
            rows.append([game, f"{self.episodes[game]:,}", *cells, *reference])
        return columns, rows

    def _slopes(self, records):
        columns = ["game", *(NAMES[m] for m in self.methods)]
        rows = [
            [
                game,
                *(
                    mean_std([r["slope"] for r in self._runs(records, game, m)])
                    for m in self.methods
                ),
            ]
            for game in self.games
        ]
        return columns, rows

    def _figure(self, records, cfr):
        plt = pyplot()
        figure, axes = plt.subplots(
            1, len(self.games), figsize=(4.8 * len(self.games), 3.6), squeeze=False
        )
        for axis, game in zip(axes[0], self.games):
            for method in self.methods:
                runs = self._runs(records, game, method)
                curves = np.log(np.array([r["nash_conv"] for r in runs]))
                mean, std = curves.mean(0), curves.std(0)
                points = runs[0]["points"]
                axis.plot(points, np.exp(mean), label=NAMES[method])
                axis.fill_between(points, np.exp(mean - std), np.exp(mean + std), alpha=0.2)
            for line in cfr:
                if line["game"] == game:
                    label = f"CFR average, {line['iterations']} it. (full feedback)"
                    axis.axhline(line["average"], color="k", linestyle="--", label=label)
            axis.set(
                title=game,
                xlabel="episodes",
                ylabel="NashConv of the last iterate",
                xscale="log",
                yscale="log",
            )
        axes[0][0].legend(fontsize=7)
        figure.tight_layout()
        return figure


__all__ = ["LastIterateStudy", "evaluation_points", "fitted_slope", "run_cfr", "run_learner"]
