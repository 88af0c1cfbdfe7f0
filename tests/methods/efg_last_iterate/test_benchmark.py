"""benchmarks/efg_last_iterate.py: the quick run's per-episode loop computes what
``TabularSolver.step(1)`` computes, its rates and ratios are the quotients it reports, its
exploitability is OpenSpiel's, and its NashConv cells are ``functional.nash_conv`` of the same
runs, recomputed here."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspiel")

import torch  # noqa: E402

from lightning_info.methods.efg_last_iterate import functional as F  # noqa: E402
from lightning_info.methods.efg_last_iterate.game import game_tree  # noqa: E402
from lightning_info.methods.efg_last_iterate.solver import TabularSolver  # noqa: E402
from tests.benchmark_scripts import load_script  # noqa: E402

GAMES = ["kuhn_poker", "leduc_poker"]


@pytest.fixture(scope="module")
def bench():
    return load_script("efg_last_iterate")


def table_rows(printed: str) -> list[list[str]]:
    """The cells of every Markdown table row printed (separator lines left out)."""
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in printed.splitlines()
        if line.startswith("| ")
    ]


def play(solver: TabularSolver, target: int, batch: int) -> TabularSolver:
    while solver.episodes < target:
        solver.step(min(batch, target - solver.episodes))
    return solver


def test_quick_run_checks_times_and_scores_the_learners(bench, capsys):
    result = bench.main(["--quick"])
    printed = capsys.readouterr().out
    rows = table_rows(printed)

    options = result["options"]
    assert options["games"] == GAMES and options["batch_sizes"] == [4, 16]
    assert options["repeats"] == 1 and options["accuracy"] is True
    assert options["budget"] == 256 and options["leduc_budget"] == 128
    assert result["header"]["threads"] == 1 and "threads 1" in printed.splitlines()[0]

    # the loop and step(1) played the same episodes to the same policy
    check = result["check"]
    assert check["agree"] is True and check["episodes"] == 20
    assert set(check["max_abs_difference"]) == set(GAMES)
    for per_game in check["max_abs_difference"].values():
        assert set(per_game) == set(F.METHODS)
        assert all(0 <= d <= 1e-9 for d in per_game.values())
    assert "give the same policy after 20 episodes" in printed

    # throughput: episodes / seconds, and the ratios over the loop's rate
    throughput = result["throughput"]
    assert len(throughput) == len(GAMES) * len(F.METHODS) * 4
    for game in GAMES:
        for method in F.METHODS:
            mine = [r for r in throughput if (r["game"], r["method"]) == (game, method)]
            assert [(r["path"], r["batch_size"]) for r in mine] == [
                ("loop", 1),
                ("step", 1),
                ("step", 4),
                ("step", 16),
            ]
            assert [r["episodes"] for r in mine] == [100, 20, 20, 80]
            loop_rate = mine[0]["episodes_per_second"]
            for r in mine:
                assert r["episodes"] == r["batch_size"] * r["updates"]
                assert r["seconds"] > 0 and r["episodes_per_second"] > 0
                assert r["episodes_per_second"] == pytest.approx(r["episodes"] / r["seconds"])
                assert r["vs_loop"] == pytest.approx(r["episodes_per_second"] / loop_rate)
                loop = r["path"] == "loop"
                label = "per-episode loop (Python)" if loop else f"step({r['batch_size']})"
                cells = [game, method, label, f"{r['batch_size']:,}", f"{r['episodes']:,}"]
                printed_row = next(row for row in rows if row[:5] == cells)
                assert printed_row[6] == f"{r['episodes_per_second']:,.0f}"
                assert printed_row[7] == bench.format_ratio(r["episodes_per_second"], loop_rate)
            assert mine[0]["vs_loop"] == 1.0

    # exploitability: our value recomputed on the same random policy, OpenSpiel's agrees
    for cost in result["nash_conv"]:
        tree = game_tree(cost["game"])
        generator = torch.Generator().manual_seed(0)
        weights = (
            torch.rand(
                tree.num_infosets, tree.num_actions, generator=generator, dtype=torch.float64
            )
            * tree.legal
        )
        assert cost["ours"] == F.nash_conv(tree, weights / weights.sum(1, keepdim=True))
        assert cost["agree"] is True
        assert cost["openspiel"] == pytest.approx(cost["ours"], abs=1e-9)
        assert cost["openspiel_cpp_br"] == pytest.approx(cost["ours"], abs=1e-9)
        assert (cost["infosets"], cost["histories"]) == (tree.num_infosets, len(tree.kind))
        for key in ("tree_seconds", "ours_seconds", "openspiel_seconds"):
            assert cost[key] > 0
        assert cost["speedup"] == pytest.approx(cost["openspiel_seconds"] / cost["ours_seconds"])
        assert cost["speedup_cpp_br"] == pytest.approx(
            cost["openspiel_cpp_br_seconds"] / cost["ours_seconds"]
        )
        printed_row = next(
            row for row in rows if row[:2] == [cost["game"], f"{tree.num_infosets:,}"]
        )
        assert printed_row[8] == bench.format_ratio(cost["openspiel_seconds"], cost["ours_seconds"])
        assert printed_row[-1] == f"{cost['ours']:.6f}"

    # accuracy: every cell is the NashConv of the same run, replayed here
    accuracy = result["accuracy"]
    # virtual_transition on Leduc: 1e5 infoset updates allow 106 episodes of 936 infosets,
    # 96 as a multiple of 16, so it has a row at 96 episodes and one at the budget
    assert [(r["game"], r["method"], r["episodes"]) for r in accuracy] == [
        ("kuhn_poker", m, 256) for m in F.METHODS
    ] + [
        ("leduc_poker", "virtual_transition", 96),
        ("leduc_poker", "virtual_transition", 128),
        ("leduc_poker", "ix_omd", 128),
        ("leduc_poker", "balanced_omd", 128),
    ]
    for row in accuracy:
        tree = game_tree(row["game"])
        episodes, method = row["episodes"], row["method"]
        assert [run["batch_size"] for run in row["runs"]] == [1, 4, 16]
        loop_run = row["runs"][0]
        if loop_run["nash_conv"] is None:  # the loop stopped short of the budget
            assert episodes == row["budget"] == 128 and method == "virtual_transition"
            assert loop_run["seconds"] is None
        else:
            loop = bench.EpisodeLoop(tree, method, seed=0)
            loop.play(episodes)
            assert loop_run["nash_conv"] == F.nash_conv(tree, loop.policy())
            step = play(TabularSolver(tree, method, seed=0), episodes, 1)
            assert loop_run["nash_conv"] == pytest.approx(step.nash_conv(), abs=1e-8)
        for run in row["runs"][1:]:
            solver = play(TabularSolver(tree, method, seed=0), episodes, run["batch_size"])
            assert run["nash_conv"] == pytest.approx(solver.nash_conv(), rel=1e-12, abs=1e-12)
            assert run["seconds"] > 0
        label = f"{episodes:,}" + ("" if episodes == row["budget"] else " (loop work)")
        printed_row = next(r for r in rows if r[:3] == [row["game"], method, label])
        assert printed_row[3:6] == [
            "-" if run["nash_conv"] is None else f"{run['nash_conv']:.4f}" for run in row["runs"]
        ]

    last = printed.strip().splitlines()[-1]
    assert json.loads(last) == json.loads(json.dumps(result))
    assert printed.strip().splitlines()[-2].startswith("measured in ")


def test_loop_agrees_with_step_one_on_another_seed(bench):
    tree = game_tree("kuhn_poker")
    for method in F.METHODS:
        loop = bench.EpisodeLoop(tree, method, seed=7)
        loop.play(40)
        solver = play(TabularSolver(tree, method, seed=7), 40, 1)
        assert loop.episodes == 40
        assert torch.allclose(loop.policy(), solver.policy, rtol=0, atol=1e-12), method
