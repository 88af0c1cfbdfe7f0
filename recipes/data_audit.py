"""Data-audit recipe: (1) a HELM-style train-test overlap report between offline text corpora
with planted contamination, (2) fragment-extraction attacks (PRISM) on tiny causal LMs trained
locally on synthetic records, for several target epoch counts.

Every field of ``recipes/data_audit.yaml`` can be overridden, e.g.::

    python recipes/data_audit.py --prism.target_epochs='[1, 8]' --overlap.n=9
    python recipes/data_audit.py --prism.enabled=false --logger=false
"""

import json
from pathlib import Path

import torch
from jsonargparse import ArgumentParser

from lightning_info.core.logging import (
    default_wandb_logger_config,
    finish_wandb_runs,
    log_wandb_tables,
    markdown_table,
)
from lightning_info.methods.prism.study import PrismStudy, prism_study
from lightning_info.methods.train_test_overlap.report import write_report
from lightning_info.methods.train_test_overlap.study import OverlapStudy, overlap_study


def run_data_audit(overlap: OverlapStudy, prism: PrismStudy, output_dir: str, logger=None):
    """Both studies; prints the tables, writes ``output_dir/data_audit.{md,json}`` and the
    overlap report, and logs the tables to ``logger`` (a ``WandbLogger``) when given."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    tables: dict[str, tuple[list[str], list[list]]] = {}
    if overlap.enabled:
        print("data audit: train-test overlap ...", flush=True)
        report, planted = overlap_study(overlap)
        write_report(report, out / "overlap_report")
        tables[f"train-test overlap (N = {overlap.n}, HELM metrics, means)"] = (
            report.summary_table()
        )
        tables[f"planted contamination ({overlap.planted_fraction:.0%} of stdlib-A)"] = planted
    if prism.enabled:
        print("data audit: fragment extraction (PRISM) ...", flush=True)
        tables["fragment extraction: attacks on targets fine-tuned for several epochs"] = (
            prism_study(prism, str(out / "prism_models"))
        )
    text = "\n\n".join(f"{title}\n\n{markdown_table(*t)}" for title, t in tables.items())
    print(f"\n{text}\n", flush=True)
    (out / "data_audit.md").write_text(text + "\n")
    (out / "data_audit.json").write_text(
        json.dumps({title: {"columns": c, "rows": r} for title, (c, r) in tables.items()}) + "\n"
    )
    if logger is not None:
        keyed = {f"data_audit/table_{i}": table for i, table in enumerate(tables.values())}
        log_wandb_tables([logger], keyed)
    return tables


def main(args=None):
    torch.set_num_threads(1)  # tiny models: one thread is fastest
    parser = ArgumentParser(default_config_files=[str(Path(__file__).with_suffix(".yaml"))])
    parser.add_argument("--config", action="config")
    parser.add_class_arguments(OverlapStudy, "overlap")
    parser.add_class_arguments(PrismStudy, "prism")
    parser.add_argument("--output_dir", type=str, default="results")
    parser.add_argument("--logger", type=bool, default=True, help="log the tables to W&B")
    config = parser.parse_args(args)
    logger = None
    if config.logger:
        from lightning.pytorch.loggers import WandbLogger

        init = default_wandb_logger_config()["init_args"]
        logger = WandbLogger(name="data_audit", group="data_audit", **init)
    try:
        return run_data_audit(
            OverlapStudy(**vars(config.overlap)),
            PrismStudy(**vars(config.prism)),
            config.output_dir,
            logger,
        )
    finally:
        if logger is not None:
            finish_wandb_runs([logger])


if __name__ == "__main__":
    main()
