"""benchmarks/harness.py: the timing helpers, the shared flags, the header and the JSON file; and
every benchmark script takes the shared flags."""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch

from tests.benchmark_scripts import BENCHMARKS, load_script

harness = load_script("harness")
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if p.name != "harness.py")


def test_timed_returns_the_result_and_a_non_negative_time():
    seconds, value = harness.timed(lambda: 41 + 1)
    assert value == 42 and seconds >= 0


def test_median_time_calls_repeats_times_and_keeps_the_last_result():
    calls = []
    seconds, value = harness.median_time(lambda: calls.append(len(calls)) or len(calls), repeats=3)
    assert calls == [0, 1, 2] and value == 3 and seconds >= 0


@pytest.mark.parametrize(
    ("numerator", "denominator", "shown"),
    [
        (3.414, 1.0, "3.41x"),
        (250.0, 2.0, "125x"),
        (1.0, 4.0, "0.25x"),
        (None, 1.0, "-"),
        (2.0, None, "-"),
    ],
)
def test_format_ratio(numerator, denominator, shown):
    assert harness.format_ratio(numerator, denominator) == shown


def test_peak_memory_sees_a_large_temporary_and_not_a_small_one():
    def allocate():
        block = np.ones(25_000_000)  # 200 MB, written so that it is resident
        return float(block[-1])

    seconds, value, extra = harness.peak_memory(allocate)
    assert value == 1.0 and seconds >= 0
    _, _, small = harness.peak_memory(lambda: sum(range(1000)))
    if sys.platform != "linux":
        assert extra is None
        return
    assert extra > 150e6 and small < 20e6


def test_run_measurement_returns_the_last_json_line_and_reports_a_failure(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(
        "import json, sys\n"
        "spec = json.loads(sys.argv[2])\n"
        "print('noise')\n"
        "if spec.get('fail'):\n"
        "    sys.exit('no good')\n"
        "print(json.dumps({'flag': sys.argv[1], **spec}))\n"
    )
    assert harness.run_measurement(script, {"n": 3}) == {"flag": "--measure", "n": 3}
    assert harness.run_measurement(script, {"n": 1}, flag="--bfs")["flag"] == "--bfs"
    with pytest.raises(RuntimeError, match="no good"):
        harness.run_measurement(script, {"fail": True})


def test_parser_holds_the_shared_flags_with_the_script_default_of_threads():
    parser = harness.benchmark_parser("a benchmark", threads=2)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8])
    args = parser.parse_args([])
    assert (args.quick, args.json, args.threads, args.sizes) == (False, None, 2, [8])
    args = parser.parse_args(["--quick", "--json", "out.json", "--threads", "0"])
    assert (args.quick, args.json, args.threads) == (True, "out.json", 0)
    assert harness.benchmark_parser("b").parse_args([]).threads == 1
    with pytest.raises(SystemExit):
        parser.parse_args(["--threads", "-1"])


def test_header_records_the_environment_and_prints_one_line():
    args = argparse.Namespace(quick=True, json=None, threads=1, sizes=[8, 16])
    head = harness.header(args)
    assert set(head) == {
        "date",
        "load_average",
        "cpus",
        "torch_threads",
        "python",
        "torch",
        "numpy",
        "options",
    }
    assert head["torch_threads"] == torch.get_num_threads()
    assert head["cpus"] == os.cpu_count()
    assert head["torch"] == torch.__version__ and head["numpy"] == np.__version__
    assert head["python"] == ".".join(map(str, sys.version_info[:3]))
    assert head["options"] == vars(args) and head["options"] is not vars(args)
    if hasattr(os, "getloadavg"):
        assert float(head["load_average"]) >= 0
    line = harness.header_line(head, "sizes [8, 16]", None, "float64")
    assert "\n" not in line
    parts = line.split(" | ")
    assert parts[0] == head["date"] and parts[-2:] == ["sizes [8, 16]", "float64"]
    for shown in (
        f"load average {head['load_average']}",
        f"torch threads {head['torch_threads']}",
        f"torch {torch.__version__}",
        f"numpy {np.__version__}",
        f"python {head['python']}",
    ):
        assert shown in parts


@dataclass
class _Row:
    name: str
    seen: set[int] = field(default_factory=set)


def test_json_round_trip_keeps_the_results_and_adds_the_header(tmp_path):
    head = harness.header(argparse.Namespace(threads=1))
    rows = [{"n": 3, "seconds": 0.25, "ratio": np.float64(1.5), "row": _Row("a", {2, 1})}]
    written = harness.write_json(tmp_path / "deep" / "rows.json", head, rows)
    read = json.loads((tmp_path / "deep" / "rows.json").read_text())
    assert read == written
    assert read["header"] == json.loads(json.dumps(head))
    assert read["results"] == [
        {"n": 3, "seconds": 0.25, "ratio": 1.5, "row": {"name": "a", "seen": [1, 2]}}
    ]

    # a mapping keeps its keys; its own header and options win over the shared ones
    own = {"header": {"threads": 1, "load_average": "9.99"}, "cells": [1], "options": {"q": 1}}
    harness.write_json(tmp_path / "own.json", head, own)
    read = json.loads((tmp_path / "own.json").read_text())
    assert list(read) == ["header", "cells", "options"]
    assert read["header"]["load_average"] == "9.99" and read["header"]["threads"] == 1
    assert read["header"]["torch"] == torch.__version__ and "options" not in read["header"]
    assert read["cells"] == [1] and read["options"] == {"q": 1}

    # options recorded in the results' own header are not repeated under "options"
    head = harness.header(argparse.Namespace(threads=1, sizes=[4]))
    doc = harness.document(head, {"header": {"threads": 1, "sizes": [4]}, "results": []})
    assert "options" not in doc["header"] and doc["header"]["sizes"] == [4]
    assert harness.document(head, {"cells": []})["header"]["options"] == {
        "threads": 1,
        "sizes": [4],
    }


def _parser_flags(path) -> set[str]:
    """The benchmark_parser call and the option strings added in a script, read from its source."""
    tree = ast.parse(path.read_text())
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    names = {getattr(c.func, "id", getattr(c.func, "attr", None)) for c in calls}
    flags = {
        arg.value
        for c in calls
        if getattr(c.func, "attr", None) == "add_argument"
        for arg in c.args
        if isinstance(arg, ast.Constant)
    }
    return flags | ({"benchmark_parser"} & names)


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.stem)
def test_every_script_builds_its_parser_on_the_harness(path):
    assert len(SCRIPTS) == 13
    source = path.read_text()
    flags = _parser_flags(path)
    assert "benchmark_parser" in flags, "build the command line with harness.benchmark_parser"
    assert not {"--quick", "--json", "--threads"} & flags, "the shared flags come from harness"
    assert "print_header(" in source and "write_json(" in source
