"""scripts/gpu_check.py in its CPU mode at toy sizes, as a subprocess: every check is present,
the CPU-runnable ones pass with finite numbers, the CUDA-only ones are skipped."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from lightning.pytorch import LightningModule

from tests.discovery import classes_of_the_package

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.py"
CUDA_ONLY = {"fisher_constraint/bf16-mixed", "fisher_constraint/fsdp"}
MODULES = {
    "AncestralGraphSearch",
    "AsymmetricActorCritic",
    "CACTI",
    "CausalLMFineTuner",
    "DiffusionModel",
    "DocKSRAG",
    "ElicitationLM",
    "Graph4MM",
    "InceptionTimeClassifier",
    "LastIterateSolver",
    "LinearAsymmetricActorCritic",
    "MLPClassifier",
    "ProDiff",
    "ROMEDistillation",
    "SDCIB",
}
CHECKS = {
    "fisher_constraint/32-true",
    *CUDA_ONLY,
    "fisher_sft/features",
    "fisher_sft/selection-on-device",
    "diffusion_fisher/trace",
    "diffusion_fisher/mvp",
    *(f"module/{name}" for name in MODULES),
}


def test_every_lightning_module_of_the_package_has_a_row():
    defined = {cls.__name__ for cls in classes_of_the_package((LightningModule,), private=False)}
    assert defined == MODULES, "add the module to MODULES in scripts/gpu_check.py and here"


def _numbers(values: dict) -> list[float]:
    return [v for v in values.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]


def test_cpu_quick_mode_passes_and_skips_the_cuda_rows(tmp_path):
    out_json, out_md = tmp_path / "check.json", tmp_path / "check.md"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--quick", "--threads", "1"]
        + ["--json", str(out_json), "--out", str(out_md)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out_json.read_text())
    assert result["header"]["gpu"] == "cpu" and result["header"]["lightning"]
    checks = result["checks"]
    assert set(checks) == CHECKS
    for name, check in checks.items():
        if name in CUDA_ONLY:
            assert check["status"] == "skipped" and check["note"] == "skipped: needs CUDA"
            continue
        assert check["status"] == "pass", (name, check)
        timings = [check["device_s"], *_numbers(check["values"])]
        assert all(math.isfinite(x) for x in timings), (name, check)
        assert check["device_s"] > 0
    constraint = checks["fisher_constraint/32-true"]["values"]
    assert constraint["factor_max_abs_diff"] <= 1e-4 and constraint["finite"]
    assert 0 < constraint["constrained_fraction"] <= 1
    assert checks["fisher_sft/features"]["values"]["same_picks"]
    assert checks["diffusion_fisher/trace"]["values"]["max_rel_diff"] <= 1e-4
    # the two CPU runs of rows 2-3 give a ratio; the modules run once in the CPU mode
    assert math.isfinite(checks["diffusion_fisher/mvp"]["ratio"])
    assert checks["module/MLPClassifier"]["cpu_s"] is None
    table = out_md.read_text()
    assert table.count("\n| ") == len(CHECKS) + 1  # the header row and one row per check
    assert "| fisher_constraint/fsdp" in done.stdout and "0 failed" in done.stdout
