"""The last-iterate recipe's study: the virtual-transition learner against IX-OMD and Balanced
OMD under bandit feedback, with the same episode budget, on each game.

Every method is tuned over a grid of the same size, ``len(multipliers) x len(taus)`` settings:
each multiplier in ``multipliers`` scales the method's default ``eta`` and ``gamma`` together
(:data:`~lightning_info.methods.efg_last_iterate.solver.DEFAULT_RATES`), and each method has one
second axis of ``len(taus)`` values: the virtual-transition method's regularisation weight
``tau`` in ``taus``, the baselines' implicit exploration (``gamma`` alone multiplied by each of
the first ``len(taus)`` entries of ``gamma_factors``; they have no ``tau``). One run per setting
on ``tuning_seed`` (a seed not among ``seeds``; the reference tunes on one of its seeds) plays
the full budget, and the lowest final NashConv picks the setting. Then for every game x
method x seed one :class:`~lightning_info.methods.efg_last_iterate.solver.TabularSolver` plays
``episodes[game]`` episodes in batches of ``batch_size`` (one size, or one per game) and
records the last iterate's NashConv at ``evaluations`` log-spaced episode counts.

The tables give the NashConv at the final budget (mean ± std over seeds), the slope of
``log NashConv`` against ``log episodes`` fitted over the evaluations from ``fit_from`` of the
budget on (the paper's rate is ``-1/8``), and the episode count from which the
virtual-transition learner's mean curve (the mean of log NashConv over seeds) stays below each
baseline's. CFR from OpenSpiel (``pyspiel.CFRSolver``, full feedback: every iteration walks the
whole tree) after ``cfr_iterations[game]`` iterations is the reference line, for its average
and its current policy. The figure plots the mean curves on log-log axes, one panel per game,
each with its fitted line, whose slope (the legend's) is the mean of the seeds' slopes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from lab.study import Study, StudyResult, run_jobs
from lightning_info.core.logging import mean_std
from lightning_info.core.plotting import pyplot
from lightning_info.methods.efg_last_iterate.functional import METHODS
from lightning_info.methods.efg_last_iterate.game import game_tree, load_game
from lightning_info.methods.efg_last_iterate.solver import DEFAULT_RATES, TabularSolver

NAMES = {
    "virtual_transition": "virtual-transition OMD (ours)",
    "ix_omd": "IX-OMD",
    "balanced_omd": "Balanced OMD",
}

Setting = tuple[float, float, float]
"""A tuning setting: ``(multiplier, tau, gamma_factor)``."""


def evaluation_points(budget: int, batch_size: int, count: int) -> list[int]:
    """``count`` log-spaced episode counts from one batch to ``budget``, on batch
    boundaries, ascending and distinct."""
    steps = np.unique(np.round(np.geomspace(1, budget // batch_size, count)).astype(int))
    return [int(s) * batch_size for s in steps]


def fitted_line(episodes: list[int], nash_conv: list[float], start: float) -> tuple[float, float]:
    """Least-squares ``(slope, intercept)`` of ``log NashConv`` on ``log episodes`` over the
    points with ``episodes >= start``."""
    x = np.log([e for e in episodes if e >= start])
    y = np.log([v for e, v in zip(episodes, nash_conv) if e >= start])
    if len(x) < 2:
        raise ValueError(f"need two evaluations from {start:g} episodes on to fit a slope.")
    slope, intercept = np.polyfit(x, y, 1)
    return float(slope), float(intercept)


def fitted_slope(episodes: list[int], nash_conv: list[float], start: float) -> float:
    """Least-squares slope of ``log NashConv`` on ``log episodes`` over the points with
    ``episodes >= start``."""
    return fitted_line(episodes, nash_conv, start)[0]


def crossing(episodes: list[int], ours: list[float], theirs: list[float]) -> float | None:
    """The episode count from which ``ours`` stays below ``theirs``: the last point where
    ``log ours - log theirs`` turns negative, interpolated linearly in log-log between the two
    evaluations around it; ``episodes[0]`` when ``ours`` is below at every evaluation, ``None``
    when it is not below at the last."""
    gap = np.log(np.asarray(ours, dtype=float)) - np.log(np.asarray(theirs, dtype=float))
    if gap[-1] >= 0:
        return None
    above = np.flatnonzero(gap >= 0)
    if above.size == 0:
        return float(episodes[0])
    i = int(above[-1])  # gap[i] >= 0 > gap[i + 1]
    x0, x1 = np.log(episodes[i]), np.log(episodes[i + 1])
    share = gap[i] / (gap[i] - gap[i + 1])
    return float(np.exp(x0 + share * (x1 - x0)))


@dataclass(frozen=True)
class LearnerJob:
    """One run of a :class:`LastIterateStudy`: a method on a game and seed, its tuning setting
    (``multiplier``, ``tau``, ``gamma_factor``), the episodes per update and the episode counts
    of the NashConv evaluations."""

    game: str
    method: str
    seed: int
    multiplier: float
    tau: float
    gamma_factor: float
    batch_size: int
    points: list[int]


@dataclass(frozen=True)
class CFRJob:
    """OpenSpiel's CFR on a game for ``iterations`` iterations (the reference line)."""

    game: str
    iterations: int


def run_learner(job: LearnerJob) -> dict[str, Any]:
    """One method on one game and seed: the job's fields and the NashConv of the last iterate
    at the evaluations."""
    torch.set_num_threads(1)
    rates = DEFAULT_RATES[job.method]
    solver = TabularSolver(
        game_tree(job.game),
        job.method,
        eta=rates["eta"] * job.multiplier,
        gamma=rates["gamma"] * job.multiplier * job.gamma_factor,
        tau=job.tau,
        seed=job.seed,
    )
    curve, diverged = [], None
    for target in job.points:
        while solver.episodes < target:
            solver.step(job.batch_size)
        if not on_simplex(solver):
            diverged = solver.episodes
            curve += [math.inf] * (len(job.points) - len(curve))
            break
        curve.append(solver.nash_conv())
    return {**asdict(job), "nash_conv": curve, "diverged": diverged}


def on_simplex(solver: TabularSolver) -> bool:
    """Whether the solver's policy still passes ``nash_conv``'s check (finite rows that sum to
    1): steps too large for float64 leave rows that do not."""
    try:
        solver.tree.check_policy(solver.policy)
    except ValueError:
        return False
    return True


def run_cfr(job: CFRJob) -> dict[str, Any]:
    """OpenSpiel's CFR (C++) for ``iterations``: the job's fields and the NashConv of its average
    and current policy."""
    import pyspiel

    game = load_game(job.game)
    solver = pyspiel.CFRSolver(game)
    for _ in range(job.iterations):
        solver.evaluate_and_update_policy()
    return {
        **asdict(job),
        "average": float(pyspiel.nash_conv(game, solver.average_policy())),
        "current": float(pyspiel.nash_conv(game, solver.current_policy())),
    }


def _final(record: dict[str, Any]) -> str:
    """A run's final NashConv, or where it diverged."""
    if record["diverged"] is not None:
        return f"diverged at {record['diverged']:,}"
    return f"{record['nash_conv'][-1]:.4f}"


def _second_axis(method: str, setting: Setting) -> str:
    """The value of ``method``'s second tuning axis in ``setting``, as a label."""
    return f"tau {setting[1]:g}" if method == "virtual_transition" else f"gamma x{setting[2]:g}"


def _setting_label(method: str, setting: Setting) -> str:
    return f"x{setting[0]:g}, {_second_axis(method, setting)}"


@dataclass
class LastIterateStudy(Study):
    """The methods side by side at the same episode budget (module docstring).

    Args:
        games: ``pyspiel.load_game`` strings.
        methods: learners to run.
        seeds: episode seeds.
        episodes: the episode budget per game.
        batch_size: episodes per update, one for every game or one per game.
        evaluations: NashConv evaluations per run (log-spaced).
        fit_from: the slope is fitted over evaluations from this share of the budget on.
        multipliers: every method's tuning grid of rate multipliers (``eta`` and ``gamma``).
        taus: the virtual-transition method's second tuning axis, its ``tau``.
        gamma_factors: the baselines' second tuning axis, a factor on ``gamma`` alone; the
            first ``len(taus)`` are used, so every method sees
            ``len(multipliers) x len(taus)`` settings (one setting: no tuning).
        tuning_seed: the seed of the tuning runs.
        cfr_iterations: CFR iterations per game (0: no reference line).
        workers: processes running runs side by side.
    """

    games: list[str] = field(default_factory=lambda: ["kuhn_poker", "leduc_poker"])
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    episodes: dict[str, int] = field(
        default_factory=lambda: {"kuhn_poker": 2_000_000, "leduc_poker": 10_000_000}
    )
    batch_size: int | dict[str, int] = field(
        default_factory=lambda: {"kuhn_poker": 256, "leduc_poker": 1024}
    )
    evaluations: int = 25
    fit_from: float = 0.01
    multipliers: list[float] = field(default_factory=lambda: [0.1, 1.0, 10.0])
    taus: list[float] = field(default_factory=lambda: [0.01, 0.1])
    gamma_factors: list[float] = field(default_factory=lambda: [1.0, 10.0])
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
        if isinstance(self.batch_size, dict):
            missing = [g for g in self.games if g not in self.batch_size]
            if missing:
                raise ValueError(f"`batch_size` gives no batch size for {missing}.")
        for game in self.games:
            load_game(game)  # refuses an unsupported game before any run
            batch = self._batch(game)
            if batch < 1:
                raise ValueError(f"the batch size of {game} must be positive, got {batch}.")
            if self.episodes[game] < 2 * batch:
                raise ValueError(
                    f"the budget of {game} ({self.episodes[game]}) must hold at least two "
                    f"batches of {batch} episodes."
                )
        if not self.multipliers or min(self.multipliers) <= 0:
            raise ValueError(f"`multipliers` must be positive, got {self.multipliers}.")
        if not self.taus or min(self.taus) < 0:
            raise ValueError(f"`taus` must be non-negative, got {self.taus}.")
        if len(self.gamma_factors) < len(self.taus) or min(self.gamma_factors) <= 0:
            raise ValueError(
                f"`gamma_factors` must hold at least as many positive factors as `taus` "
                f"({len(self.taus)}), so that every method sees as many settings; got "
                f"{self.gamma_factors}."
            )
        if self.tuning_seed in self.seeds and self.grid_size > 1:
            raise ValueError("`tuning_seed` must not be one of `seeds`: tune on another seed.")
        if not 0 < self.fit_from < 1:
            raise ValueError(f"`fit_from` must be in (0, 1), got {self.fit_from}.")

    def _batch(self, game: str) -> int:
        return self.batch_size[game] if isinstance(self.batch_size, dict) else self.batch_size

    def _job(self, game: str, method: str, seed: int, setting: Setting) -> LearnerJob:
        points = evaluation_points(self.episodes[game], self._batch(game), self.evaluations)
        multiplier, tau, gamma_factor = setting
        return LearnerJob(
            game=game,
            method=method,
            seed=seed,
            multiplier=multiplier,
            tau=tau,
            gamma_factor=gamma_factor,
            batch_size=self._batch(game),
            points=points,
        )

    def grid(self, method: str) -> list[Setting]:
        """``method``'s tuning settings ``(multiplier, tau, gamma_factor)``: every multiplier
        with each value of the method's second axis (module docstring)."""
        if method == "virtual_transition":
            second = [(tau, 1.0) for tau in self.taus]
        else:
            second = [(0.0, factor) for factor in self.gamma_factors[: len(self.taus)]]
        return [(x, tau, factor) for tau, factor in second for x in self.multipliers]

    @property
    def grid_size(self) -> int:
        """The number of settings every method is tuned over."""
        return len(self.multipliers) * len(self.taus)

    def _tune(self) -> tuple[dict[tuple[str, str], Setting], list[dict[str, Any]]]:
        settings = [(g, m) for g in self.games for m in self.methods]
        if self.grid_size == 1:
            return {(g, m): self.grid(m)[0] for g, m in settings}, []
        jobs = [self._job(g, m, self.tuning_seed, s) for g, m in settings for s in self.grid(m)]
        runs = run_jobs(
            run_learner,
            jobs,
            self.workers,
            lambda r: (
                f"tuning {r['game']} {NAMES[r['method']]} "
                f"{_setting_label(r['method'], self._setting(r))}: NashConv {_final(r)}"
            ),
        )
        chosen = {}
        for game, method in settings:
            tried = [r for r in runs if (r["game"], r["method"]) == (game, method)]
            chosen[game, method] = self._setting(min(tried, key=lambda r: r["nash_conv"][-1]))
        return chosen, runs

    @staticmethod
    def _setting(record: dict[str, Any]) -> Setting:
        return (record["multiplier"], record["tau"], record["gamma_factor"])

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
            CFRJob(game=g, iterations=self.cfr_iterations[g])
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
            start = self._fit_start(r["game"])
            r["slope"] = (
                math.nan if r["diverged"] else fitted_slope(r["points"], r["nash_conv"], start)
            )
        tables = {"last-iterate NashConv at the final budget": self._table(records, cfr)}
        tables[f"fitted slope of log NashConv on log episodes (from {self.fit_from:.0%})"] = (
            self._slopes(records)
        )
        baselines = [m for m in self.methods if m != "virtual_transition"]
        if "virtual_transition" in self.methods and baselines:
            title = "episodes from which ours stays below (mean log NashConv over seeds)"
            tables[title] = self._crossings(records, baselines)
        if tuning:
            title = "tuning: final NashConv on the tuning seed per rate multiplier"
            tables[title] = self._tuning_table(tuning, chosen)
        return StudyResult(
            tables,
            {"nash_conv": self._figure(records, cfr)},
            {"runs": records, "cfr": cfr, "tuning": tuning},
            self._line_plots(records),
        )

    def _fit_start(self, game: str) -> float:
        return self.fit_from * self.episodes[game]

    def _mean_curve(self, records, game, method) -> tuple[list[int], np.ndarray]:
        """The evaluations and the mean curve: ``exp`` of the mean over seeds of log
        NashConv (the geometric mean)."""
        runs = self._runs(records, game, method)
        return runs[0]["points"], np.exp(np.log([r["nash_conv"] for r in runs]).mean(0))

    def _tuning_table(self, tuning, chosen):
        columns = ["game", "method", "second axis", *(f"x{x:g}" for x in self.multipliers)]
        rows = []
        for game in self.games:
            for method in self.methods:
                grid = self.grid(method)
                for k in range(len(self.taus)):
                    row = grid[k * len(self.multipliers) : (k + 1) * len(self.multipliers)]
                    cells = []
                    for setting in row:
                        run = next(
                            r
                            for r in tuning
                            if (r["game"], r["method"]) == (game, method)
                            and self._setting(r) == setting
                        )
                        mark = " (chosen)" if chosen[game, method] == setting else ""
                        cells.append(_final(run) + mark)
                    rows.append([game, NAMES[method], _second_axis(method, row[0]), *cells])
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
            "batch",
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
            rows.append([game, f"{self.episodes[game]:,}", *cells, *reference, self._batch(game)])
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

    def _crossings(self, records, baselines):
        columns = ["game", *(f"vs {NAMES[m]}" for m in baselines)]
        rows = []
        for game in self.games:
            points, ours = self._mean_curve(records, game, "virtual_transition")
            cells = []
            for method in baselines:
                at = crossing(points, ours, self._mean_curve(records, game, method)[1])
                if at is None:
                    cells.append(f"not by {points[-1]:,}")
                elif at == points[0]:
                    cells.append(f"from {points[0]:,} (the first evaluation)")
                else:
                    cells.append(f"{at:,.0f}")
            rows.append([game, *cells])
        return columns, rows

    def _line_plots(self, records):
        """Per game, the mean over seeds of log10 NashConv against log10 episodes (W&B's
        native line plots have linear axes)."""
        plots = {}
        for game in self.games:
            series = {}
            for method in self.methods:
                points, mean = self._mean_curve(records, game, method)
                series[NAMES[method]] = np.log10(mean)
            plots[f"log10_nash_conv_{game}"] = ("log10 episodes", np.log10(points), series)
        return plots

    def _figure(self, records, cfr):
        plt = pyplot()
        figure, axes = plt.subplots(
            1, len(self.games), figsize=(4.8 * len(self.games), 3.6), squeeze=False
        )
        for axis, game in zip(axes[0], self.games):
            start = self._fit_start(game)
            for method in self.methods:
                runs = self._runs(records, game, method)
                points, mean = self._mean_curve(records, game, method)
                std = np.log([r["nash_conv"] for r in runs]).std(0)
                # the fit of the mean log curve: its slope is the mean of the seeds' slopes
                slope, intercept = fitted_line(points, mean, start)
                (line,) = axis.plot(points, mean, label=NAMES[method])
                axis.fill_between(points, mean * np.exp(-std), mean * np.exp(std), alpha=0.2)
                fit = np.array([p for p in points if p >= start], dtype=float)
                axis.plot(
                    fit,
                    np.exp(intercept) * fit**slope,
                    color=line.get_color(),
                    linestyle=":",
                    label=f"fit from {self.fit_from:.0%}: slope {slope:.3f}",
                )
            for line in cfr:
                if line["game"] == game:
                    label = f"CFR average, {line['iterations']} it. (full feedback)"
                    axis.axhline(line["average"], color="k", linestyle="--", label=label)
            axis.set(
                title=f"{game} (batches of {self._batch(game)})",
                xlabel="episodes",
                ylabel="NashConv of the last iterate",
                xscale="log",
                yscale="log",
            )
            axis.legend(fontsize=6)
        figure.tight_layout()
        return figure


__all__ = [
    "CFRJob",
    "LastIterateStudy",
    "LearnerJob",
    "crossing",
    "evaluation_points",
    "fitted_line",
    "fitted_slope",
    "run_cfr",
    "run_learner",
]
