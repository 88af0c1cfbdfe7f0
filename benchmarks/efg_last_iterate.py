"""Last-iterate learners for extensive-form games under bandit feedback: episodes per second of
the update against a per-episode Python loop, the cost of exact exploitability against
OpenSpiel's, and the NashConv reached at equal episodes with and without batching.

The learners are ``TabularSolver`` (``lightning_info/methods/efg_last_iterate``) with each method
of ``METHODS`` (``virtual_transition``, ``ix_omd``, ``balanced_omd``) at its ``DEFAULT_RATES``,
seed ``--seed`` (0), on the games ``--games`` (``kuhn_poker``, ``leduc_poker``). Every timing runs
on ``--threads`` torch threads (default 1: one thread).

- ``throughput``: episodes per second of three ways to play episodes and update the policy:

  - loop: :class:`EpisodeLoop`, the update written per node in Python, as the reference code is
    written, on the same ``GameTree`` arrays (read into Python lists once; no pyspiel states).
    Each episode walks from the root, taking each history's action by inverting the cumulative
    distribution of the current policy row (or of chance's probabilities) at the uniforms
    ``functional.episode_uniforms(seed, [episode id], tree.path_length)`` gives (drawn for 4,096
    episodes per call: they do not depend on the policy), and records each player's last
    sequence and its own plan (the product of its own probabilities on the way). Then, with the
    rates of ``SolverRates`` at ``k`` = episode index + 1: the implicit-exploration loss at each
    player's last sequence, and the closed-form dilated OMD step: for ``ix_omd`` and
    ``balanced_omd`` only along the visited infosets (each player's chain of parent sequences,
    walked backwards as the reference's ``update`` does; exact, since an unvisited subtree has
    zero loss and keeps its policy); for ``virtual_transition``, whose regulariser gradient
    (``negentropy_gradient``) is non-zero at every sequence, the log plan top-down and then the
    step bottom-up over every infoset, one Python loop iteration per infoset. One update per
    episode.
  - ``TabularSolver.step(1)``: the vectorised torch update, one update per episode: the same
    algorithm. An untimed check first plays ``--check-episodes`` (50) episodes through both,
    from the same seed, for every game and method, and asserts that the policies agree to 1e-9.
  - ``TabularSolver.step(b)`` for every ``b`` in ``--batch-sizes`` (64 256 1024): one update per
    batch, the mini-batch variant, in which the batch stands for ``b`` per-episode updates with
    the policy held fixed (``solver_update``); a different algorithm from the two above.

  The loop plays ``--loop-episodes`` (2000) episodes, ``step(1)`` ``--step-episodes`` (300) and
  every ``step(b)`` ``--batch-updates`` (30) updates, each from a fresh learner (built outside the
  timing, uniform policy); seconds are the median of ``--repeats`` (3) runs (an untimed update of
  every batch size comes first). Episodes per second divide the episodes played by the seconds;
  ``vs loop`` is that rate over the loop's.
- ``nash_conv``: seconds per call of ``functional.nash_conv(tree, policy)`` against OpenSpiel's
  ``open_spiel.python.algorithms.exploitability.nash_conv(game, tabular_policy)``, Python best
  responses and ``use_cpp_br=True``, for a random policy (uniform weights on the legal actions,
  normalised, ``torch.Generator`` seeded ``--seed``). Ours is meant for repeated calls on a tree
  built once: the ``GameTree`` is built outside the timing (``game_tree`` of the loaded game, a
  fresh walk, its seconds the median of ``--repeats`` builds, reported apart), and so is the
  OpenSpiel ``TabularPolicy`` (``game.to_tabular_policy``, seconds reported apart). Seconds per
  call: the median of ``10 x --repeats`` calls for ours (milliseconds each), of ``--repeats`` for
  each OpenSpiel variant; the ratios are OpenSpiel's seconds over ours. An untimed first call of
  each asserts that the three values agree to 1e-9.
- ``accuracy`` (``--accuracy``, on by default; ``--no-accuracy`` skips it): NashConv
  (``functional.nash_conv``) of the last iterate after the episode budget (``--leduc-budget``,
  100,000, for ``leduc_poker``; ``--budget``, 200,000, for every other game) at batch 1 and at every
  batch size (each run seeded ``--seed``; a batched run's last update takes the remainder of the
  budget, so every column plays exactly the budget). Batch 1 is played by the loop, which the check
  shows to compute what ``step(1)`` computes (``step(1)`` plays under 2,000 episodes/s on this
  machine's two cores, several minutes per budget). A batch-1 run is allowed ``--loop-work`` (1e7)
  infoset updates: the loop updates all ``X`` infosets per episode for ``virtual_transition`` and at
  most ``2 x depth`` (the two players' chains) for the others; where the budget needs more
  (``virtual_transition`` on Leduc: 936 infosets), the loop stops at the largest multiple of every
  batch size within that work, the batched runs record their NashConv at that count too, and the
  table gives a row at that count (all columns) as well as the row at the budget (batch 1: "-").
  Seconds of each run (NashConv evaluations excluded) are reported alongside.

The header (``benchmarks/harness.py``) gives the date, the 1-minute load average at the start,
the CPU count, the thread count, python's, torch's, numpy's and OpenSpiel's versions; the last
lines the whole run's seconds, then the results as one JSON line (``--json PATH`` also writes
them to a file). ``--quick``: batch sizes 4 16, 20 check episodes, 100 loop episodes, 20
``step(1)`` episodes, 5 batched updates, one repeat, budgets 256 / 128 episodes, loop work 1e5.

Usage::

    python benchmarks/efg_last_iterate.py [--quick] [--games kuhn_poker leduc_poker]
        [--batch-sizes 64 256 1024] [--check-episodes 50] [--loop-episodes 2000]
        [--step-episodes 300] [--batch-updates 30] [--repeats 3] [--no-accuracy]
        [--budget 200000] [--leduc-budget 100000] [--loop-work 1e7] [--seed 0] [--threads 1]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from importlib import metadata

import torch
from harness import (
    benchmark_parser,
    document,
    format_ratio,
    header,
    median_time,
    print_header,
    timed,
    write_json,
)

from lightning_info.core.logging import markdown_table
from lightning_info.core.threads import torch_threads
from lightning_info.methods.efg_last_iterate import functional as F
from lightning_info.methods.efg_last_iterate import game as G
from lightning_info.methods.efg_last_iterate.solver import DEFAULT_RATES, TabularSolver

UNIFORM_CHUNK = 4096
"""Episodes whose uniforms the loop draws in one ``episode_uniforms`` call."""


def parse(args=None) -> argparse.Namespace:
    parser = benchmark_parser(__doc__.split("\n\n")[0], threads=1)
    parser.add_argument("--games", nargs="+", default=["kuhn_poker", "leduc_poker"])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--check-episodes", type=int, default=50)
    parser.add_argument("--loop-episodes", type=int, default=2000)
    parser.add_argument("--step-episodes", type=int, default=300)
    parser.add_argument("--batch-updates", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--accuracy", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--budget", type=int, default=200_000)
    parser.add_argument("--leduc-budget", type=int, default=100_000)
    parser.add_argument("--loop-work", type=float, default=1e7)
    parser.add_argument("--seed", type=int, default=0)
    parsed = parser.parse_args(args)
    if parsed.quick:
        parsed.batch_sizes, parsed.check_episodes, parsed.loop_episodes = [4, 16], 20, 100
        parsed.step_episodes, parsed.batch_updates, parsed.repeats = 20, 5, 1
        parsed.budget, parsed.leduc_budget, parsed.loop_work = 256, 128, 1e5
    if min(parsed.batch_sizes) < 2 or min(parsed.budget, parsed.leduc_budget) < 1:
        parser.error("batch sizes must exceed 1 (batch 1 is always run) and budgets be positive")
    return parsed


def budget_of(game: str, options) -> int:
    return options.leduc_budget if game == "leduc_poker" else options.budget


# ---------------------------------------------------------------------------- the baseline
def _normalise_into(row: list[float], moves: list[int], logits: list[float]) -> float:
    """Write ``logits - log_z`` into ``row`` at ``moves``; return ``log_z`` (log-sum-exp)."""
    top, total = max(logits), 0.0
    for v in logits:
        total += math.exp(v - top)
    log_z = math.log(total) + top
    for a, v in zip(moves, logits):
        row[a] = v - log_z
    return log_z


class EpisodeLoop:
    """The learner of ``TabularSolver`` written per node in plain Python (module docstring):
    one episode at a time, one update per episode, on the ``GameTree``'s arrays read into
    Python lists. ``log_policy`` is the ``(X, A)`` table as lists (``-inf`` at illegal
    actions); its rows are updated in place."""

    def __init__(self, tree: G.GameTree, method: str, seed: int = 0) -> None:
        base = DEFAULT_RATES[method]
        rates = F.SolverRates(tree, method, base["eta"], base["gamma"], base["tau"])
        self.seed, self.length, self.episodes = int(seed), tree.path_length, 0
        self.scheduled = method == "virtual_transition"  # the k-dependent rates of SolverRates
        self.tau = rates.tau
        self.actions = actions = tree.num_actions
        self.low, self.high = tree.utility_range
        self.log_policy = torch.log(tree.uniform_policy()).tolist()
        self.gamma = rates.gamma_x.tolist()
        moves = [torch.nonzero(row).flatten().tolist() for row in tree.legal]
        parent, eta = tree.parent_sequence.tolist(), rates.eta_x.tolist()
        weight, log_weight = rates.weight.tolist(), torch.log(rates.weight).tolist()
        # per infoset: its row, legal actions, base rate eta_x and parent sequence (chain walk)
        self.infosets = [(self.log_policy[x], moves[x], eta[x], parent[x]) for x in range(len(eta))]
        order = [layer.infosets.tolist() for layer in tree.layers]
        self.top_down = [
            (self.log_policy[x], moves[x], x * actions, parent[x], weight[x], log_weight[x])
            for depth in order
            for x in depth
        ]
        self.bottom_up = [
            (self.log_policy[x], moves[x], x * actions, parent[x], eta[x])
            for depth in reversed(order)
            for x in depth
        ]
        self.log_plan = [0.0] * (len(eta) * actions)
        self.adjusted = [0.0] * (len(eta) * actions)
        kind, infoset = tree.kind.tolist(), tree.node_infoset.tolist()
        child, player, returns = tree.child.tolist(), tree.player.tolist(), tree.returns.tolist()
        chance_cum = tree.chance_prob.cumsum(1).tolist()  # the cumulative sums the solver inverts
        self.nodes: list[tuple] = []
        for node, what in enumerate(kind):
            slots = [s for s, c in enumerate(child[node]) if c >= 0]
            children = [child[node][s] for s in slots]
            if what == G.TERMINAL:
                self.nodes.append((G.TERMINAL, returns[node]))
            elif what == G.CHANCE:
                cum = chance_cum[node]
                self.nodes.append((G.CHANCE, cum[-1], [cum[s] for s in slots], children))
            else:
                x = infoset[node]
                assert slots == moves[x], "a decision's children are its legal actions"
                self.nodes.append((G.DECISION, x, player[x], x * actions, slots, children))

    def policy(self) -> torch.Tensor:
        return torch.tensor(self.log_policy, dtype=torch.float64).exp()

    def play(self, count: int) -> None:
        """Play and learn from the next ``count`` episodes, one update each."""
        end = self.episodes + count
        for start in range(self.episodes, end, UNIFORM_CHUNK):
            ids = torch.arange(start, min(start + UNIFORM_CHUNK, end))
            for uniforms in F.episode_uniforms(self.seed, ids, self.length).tolist():
                self.episode(uniforms)

    def episode(self, uniforms: list[float]) -> None:
        exp, nodes, log_policy = math.exp, self.nodes, self.log_policy
        last, plan = [-1, -1], [1.0, 1.0]
        entry, t = nodes[0], 0
        while entry[0] != G.TERMINAL:
            if entry[0] == G.CHANCE:
                _, total, cums, children = entry
                threshold = uniforms[t] * total
                node = children[-1]
                for c, target in zip(cums, children):
                    if c > threshold:
                        node = target
                        break
            else:
                _, x, i, base, moves, children = entry
                row = log_policy[x]
                probs = [exp(row[a]) for a in moves]
                total = 0.0
                for p in probs:
                    total += p
                threshold, c = uniforms[t] * total, 0.0
                for a, p, node in zip(moves, probs, children):  # noqa: B007 (used after the loop)
                    c += p
                    if c > threshold:
                        break
                last[i] = base + a
                plan[i] *= p
            entry, t = nodes[node], t + 1
        k = self.episodes + 1
        if self.scheduled:  # SolverRates.at(k) of virtual_transition
            f_eta, f_gamma, tau = k**-0.625, k**-0.375, self.tau * k**-0.125
        else:
            f_eta, f_gamma, tau = 1.0, 1.0, 0.0
        returns, span = entry[1], self.high - self.low
        losses = []
        for i in (0, 1):
            s = last[i]
            if s >= 0:
                loss = (self.high - returns[i]) / span
                losses.append((s, loss / (plan[i] + self.gamma[s // self.actions] * f_gamma)))
        if tau > 0:
            self._dense_update(losses, tau, f_eta)
        else:
            self._chain_update(losses, f_eta)
        self.episodes = k

    def _chain_update(self, losses, f_eta: float) -> None:
        """The OMD step along each player's visited chain, deepest infoset first."""
        actions, infosets = self.actions, self.infosets
        for s, loss in losses:
            x, a = divmod(s, actions)
            while True:
                row, moves, eta, up = infosets[x]
                eta = eta * f_eta
                logits = [row[b] - eta * loss if b == a else row[b] for b in moves]
                log_z = _normalise_into(row, moves, logits)
                if up < 0:
                    break
                x, a = divmod(up, actions)
                loss = -(log_z / eta)  # the only non-zero adjusted loss of the parent's row

    def _dense_update(self, losses, tau: float, f_eta: float) -> None:
        """The regulariser gradient at every sequence, then the OMD step over every infoset."""
        log_plan, adjusted = self.log_plan, self.adjusted
        for row, moves, base, up, w, lw in self.top_down:
            if up < 0:
                for a in moves:
                    v = row[a]
                    log_plan[base + a] = v
                    adjusted[base + a] = tau * (w * ((lw + v) + 1.0))
            else:
                above = log_plan[up]
                for a in moves:
                    v = row[a] + above
                    log_plan[base + a] = v
                    adjusted[base + a] = tau * (w * ((lw + v) + 1.0))
        for s, loss in losses:
            adjusted[s] = loss + adjusted[s]
        for row, moves, base, up, eta in self.bottom_up:
            eta = eta * f_eta
            logits = [row[a] - eta * adjusted[base + a] for a in moves]
            log_z = _normalise_into(row, moves, logits)
            if up >= 0:
                adjusted[up] -= log_z / eta


# ------------------------------------------------------------------------------ throughput
def check(tree: G.GameTree, method: str, options) -> float:
    """Max |policy difference| between the loop and ``step(1)`` after the check episodes."""
    loop, solver = (
        EpisodeLoop(tree, method, options.seed),
        TabularSolver(tree, method, seed=options.seed),
    )
    loop.play(options.check_episodes)
    for _ in range(options.check_episodes):
        solver.step(1)
    difference = float((loop.policy() - solver.policy).abs().max())
    assert loop.episodes == solver.episodes == options.check_episodes
    assert difference <= 1e-9, (
        f"{tree.name} {method}: the loop and TabularSolver.step(1) differ by {difference:.3g} "
        f"after {options.check_episodes} episodes (seed {options.seed})"
    )
    return difference


def median_seconds(make, run, repeats: int) -> float:
    """Median over ``repeats`` of the seconds of ``run(learner)``, each on a fresh
    ``learner = make()`` built outside the timing."""
    seconds = []
    for _ in range(repeats):
        learner = make()
        seconds.append(timed(lambda learner=learner: run(learner))[0])
    return statistics.median(seconds)


def throughput(tree: G.GameTree, game: str, method: str, options) -> list[dict]:
    """Section ``throughput`` of the module docstring for one game and method."""
    seed, repeats = options.seed, max(1, options.repeats)
    rows = []

    def row(path: str, batch: int, updates: int, seconds: float) -> dict:
        episodes = batch * updates
        return {
            "game": game,
            "method": method,
            "path": path,
            "batch_size": batch,
            "updates": updates,
            "episodes": episodes,
            "seconds": seconds,
            "episodes_per_second": episodes / seconds,
        }

    count = options.loop_episodes
    seconds = median_seconds(
        lambda: EpisodeLoop(tree, method, seed), lambda loop: loop.play(count), repeats
    )
    rows.append(row("loop", 1, count, seconds))

    def steps(batch: int, updates: int):
        def run(solver: TabularSolver) -> None:
            for _ in range(updates):
                solver.step(batch)

        TabularSolver(tree, method, seed=seed).step(batch)  # untimed warm-up
        return median_seconds(lambda: TabularSolver(tree, method, seed=seed), run, repeats)

    rows.append(row("step", 1, options.step_episodes, steps(1, options.step_episodes)))
    for batch in options.batch_sizes:
        rows.append(row("step", batch, options.batch_updates, steps(batch, options.batch_updates)))
    loop_rate = rows[0]["episodes_per_second"]
    for r in rows:
        r["vs_loop"] = r["episodes_per_second"] / loop_rate
    return rows


# ------------------------------------------------------------------------------- nash_conv
def nash_conv_costs(name: str, options) -> dict:
    """Section ``nash_conv`` of the module docstring for one game."""
    from open_spiel.python.algorithms import exploitability

    game = G.load_game(name)
    repeats = max(1, options.repeats)
    tree_seconds, tree = median_time(lambda: G.game_tree(game), repeats)
    generator = torch.Generator().manual_seed(options.seed)
    weights = (
        torch.rand(tree.num_infosets, tree.num_actions, generator=generator, dtype=torch.float64)
        * tree.legal
    )
    policy = weights / weights.sum(1, keepdim=True)
    table_seconds, table = timed(lambda: G.to_tabular_policy(tree, policy, name))
    ours = F.nash_conv(tree, policy)  # untimed first calls: the values agree
    python_br = float(exploitability.nash_conv(game, table))
    cpp_br = float(exploitability.nash_conv(game, table, use_cpp_br=True))
    for value in (python_br, cpp_br):
        assert abs(ours - value) <= 1e-9, f"{name}: nash_conv {ours!r} against OpenSpiel {value!r}"
    ours_seconds, _ = median_time(lambda: F.nash_conv(tree, policy), 10 * repeats)
    python_seconds, _ = median_time(lambda: exploitability.nash_conv(game, table), repeats)
    cpp_seconds, _ = median_time(
        lambda: exploitability.nash_conv(game, table, use_cpp_br=True), repeats
    )
    return {
        "game": name,
        "infosets": tree.num_infosets,
        "histories": len(tree.kind),
        "tree_seconds": tree_seconds,
        "tabular_policy_seconds": table_seconds,
        "ours_seconds": ours_seconds,
        "openspiel_seconds": python_seconds,
        "openspiel_cpp_br_seconds": cpp_seconds,
        "speedup": python_seconds / ours_seconds,
        "speedup_cpp_br": cpp_seconds / ours_seconds,
        "ours": ours,
        "openspiel": python_br,
        "openspiel_cpp_br": cpp_br,
        "agree": True,
    }


# -------------------------------------------------------------------------------- accuracy
def loop_budget(tree: G.GameTree, method: str, budget: int, options) -> int:
    """The episodes the batch-1 loop plays: the budget, or what ``--loop-work`` allows."""
    touched = tree.num_infosets if method == "virtual_transition" else 2 * len(tree.layers)
    if budget * touched <= options.loop_work:
        return budget
    unit = math.lcm(*options.batch_sizes)
    return min(budget, max(unit, int(options.loop_work // touched) // unit * unit))


def accuracy(tree: G.GameTree, game: str, method: str, options) -> list[dict]:
    """Section ``accuracy`` of the module docstring for one game and method: one row per
    episode count (the budget, and the loop's shorter count where it stops early)."""
    budget = budget_of(game, options)
    short = loop_budget(tree, method, budget, options)
    targets = sorted({short, budget})
    runs = {target: [] for target in targets}
    loop = EpisodeLoop(tree, method, options.seed)
    seconds, _ = timed(lambda: loop.play(short))
    for target in targets:
        done = target == short
        runs[target].append(
            {
                "batch_size": 1,
                "path": "loop",
                "nash_conv": F.nash_conv(tree, loop.policy()) if done else None,
                "seconds": seconds if done else None,
            }
        )
    for batch in options.batch_sizes:
        solver, seconds = TabularSolver(tree, method, seed=options.seed), 0.0
        for target in targets:

            def play(solver=solver, target=target, batch=batch) -> None:
                while solver.episodes < target:
                    solver.step(min(batch, target - solver.episodes))

            seconds += timed(play)[0]
            runs[target].append(
                {
                    "batch_size": batch,
                    "path": "step",
                    "nash_conv": solver.nash_conv(),
                    "seconds": seconds,
                }
            )
    return [
        {"game": game, "method": method, "episodes": t, "budget": budget, "runs": runs[t]}
        for t in targets
    ]


# ------------------------------------------------------------------------------------ main
def main(args=None) -> dict:
    options = parse(args)
    with torch_threads(options.threads):
        return _run(options)


def _run(options: argparse.Namespace) -> dict:
    start = time.perf_counter()
    head = header(options)
    load = head["load_average"]
    trees = {name: G.game_tree(name) for name in options.games}
    checks = {
        name: {method: check(tree, method, options) for method in F.METHODS}
        for name, tree in trees.items()
    }
    rates = [
        r
        for name, tree in trees.items()
        for m in F.METHODS
        for r in throughput(tree, name, m, options)
    ]
    costs = [nash_conv_costs(name, options) for name in options.games]
    accurate = []
    if options.accuracy:
        accurate = [
            r
            for name, tree in trees.items()
            for m in F.METHODS
            for r in accuracy(tree, name, m, options)
        ]

    versions = {name: metadata.version(name) for name in ("torch", "numpy", "open_spiel")}
    games = ", ".join(
        f"{name} ({tree.num_infosets:,} infosets, {len(tree.kind):,} histories)"
        for name, tree in trees.items()
    )
    print_header(
        head,
        f"open_spiel {versions['open_spiel']}",
        games,
        f"seed {options.seed}",
        "DEFAULT_RATES",
        f"{options.repeats} repeat(s), median",
    )
    worst = max(d for per_game in checks.values() for d in per_game.values())
    print(
        f"check: the per-episode loop and TabularSolver.step(1) give the same policy after "
        f"{options.check_episodes} episodes for every game and method (max |difference| "
        f"{worst:.2g} <= 1e-9): ok\n"
    )
    threads = torch.get_num_threads()
    on = "one torch thread" if threads == 1 else f"{threads} torch threads"
    print(f"episodes per second of the update ({on}):\n")
    rows = [
        [
            r["game"],
            r["method"],
            "per-episode loop (Python)" if r["path"] == "loop" else f"step({r['batch_size']})",
            f"{r['batch_size']:,}",
            f"{r['episodes']:,}",
            f"{1e3 * r['seconds'] / r['updates']:.3f}",
            f"{r['episodes_per_second']:,.0f}",
            format_ratio(r["episodes_per_second"], loop_row(rates, r)["episodes_per_second"]),
        ]
        for r in rates
    ]
    columns = [
        "game",
        "method",
        "update",
        "episodes / update",
        "episodes timed",
        "ms / update",
        "episodes/s",
        "vs loop",
    ]
    print(markdown_table(columns, rows))
    print(
        "\nexploitability of a random policy: functional.nash_conv against OpenSpiel's "
        "exploitability.nash_conv:\n"
    )
    rows = [
        [
            c["game"],
            f"{c['infosets']:,}",
            f"{c['histories']:,}",
            f"{1e3 * c['tree_seconds']:.1f}",
            f"{1e3 * c['tabular_policy_seconds']:.1f}",
            f"{1e3 * c['ours_seconds']:.3f}",
            f"{1e3 * c['openspiel_seconds']:.2f}",
            f"{1e3 * c['openspiel_cpp_br_seconds']:.2f}",
            format_ratio(c["openspiel_seconds"], c["ours_seconds"]),
            format_ratio(c["openspiel_cpp_br_seconds"], c["ours_seconds"]),
            f"{c['ours']:.6f}",
        ]
        for c in costs
    ]
    columns = [
        "game",
        "infosets",
        "histories",
        "tree build ms",
        "TabularPolicy ms",
        "ours ms/call",
        "OpenSpiel ms/call",
        "OpenSpiel cpp_br ms/call",
        "OpenSpiel / ours",
        "cpp_br / ours",
        "NashConv",
    ]
    print(markdown_table(columns, rows))
    if accurate:
        sizes = [1, *options.batch_sizes]
        print(
            f"\nNashConv of the last iterate at equal episodes (seed {options.seed}; batch 1: "
            "the per-episode loop; seconds of play per column):\n"
        )
        rows = []
        for r in accurate:
            by_size = {run["batch_size"]: run for run in r["runs"]}
            rows.append(
                [
                    r["game"],
                    r["method"],
                    f"{r['episodes']:,}" + ("" if r["episodes"] == r["budget"] else " (loop work)"),
                    *(cell(by_size[b]["nash_conv"], "{:.4f}") for b in sizes),
                    " / ".join(cell(by_size[b]["seconds"], "{:.2f}") for b in sizes),
                ]
            )
        columns = [
            "game",
            "method",
            "episodes",
            "batch 1 (loop)",
            *(f"batch {b:,}" for b in options.batch_sizes),
            "seconds (" + " / ".join(str(b) for b in sizes) + ")",
        ]
        print(markdown_table(columns, rows))
    elapsed = time.perf_counter() - start
    print(f"\nmeasured in {elapsed:.1f} s")
    result = {
        "header": {
            **versions,
            "threads": torch.get_num_threads(),
            "load_average": load,
            "games": {
                name: {"infosets": tree.num_infosets, "histories": len(tree.kind)}
                for name, tree in trees.items()
            },
        },
        "check": {
            "episodes": options.check_episodes,
            "max_abs_difference": checks,
            "agree": True,
        },
        "throughput": rates,
        "nash_conv": costs,
        "accuracy": accurate,
        "seconds": elapsed,
        "options": vars(options),
    }
    result = document(head, result)
    if options.json:
        write_json(options.json, head, result)
    print(json.dumps(result))
    return result


def loop_row(rows: list[dict], row: dict) -> dict:
    """The loop's row of ``row``'s game and method."""
    key = (row["game"], row["method"], "loop")
    return next(r for r in rows if (r["game"], r["method"], r["path"]) == key)


def cell(value, spec: str) -> str:
    return "-" if value is None else spec.format(value)


if __name__ == "__main__":
    main()
