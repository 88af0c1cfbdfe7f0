"""The train-test overlap study of the data-audit recipe: the standard library's docstrings are
split by module into a training corpus and two held-out "benchmarks" (instances: a docstring's
first line as input, the rest as reference); a seeded fraction of one benchmark's instances is
planted verbatim into the training corpus. The HELM-style report
(:func:`~lightning_info.methods.train_test_overlap.functional.compute_overlap`) should flag every
planted instance and few others. The study is the ``overlap`` entry of
``recipes/data_audit.yaml``; the full report goes to ``<output_dir>/overlap_report.{md,json}``."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lab.study import Study, StudyResult
from lightning_info.lm.corpus import split_corpus, stdlib_docstrings
from lightning_info.methods.train_test_overlap.functional import (
    OverlapOptions,
    TestInstance,
    compute_overlap,
)
from lightning_info.methods.train_test_overlap.report import OverlapReport, write_report


@dataclass
class OverlapStudy(Study):
    """N-gram overlap between held-out docstring benchmarks and a corpus with planted copies."""

    n: int = 13
    planted_fraction: float = 0.1
    tokenizer: str = "default"
    seed: int = 0

    def run(self, cli) -> StudyResult:
        report, planted = overlap_study(self)
        write_report(report, cli.output_dir / "overlap_report")
        return StudyResult(
            {
                f"train-test overlap (N = {self.n}, HELM metrics, means)": report.summary_table(),
                f"planted contamination ({self.planted_fraction:.0%} of stdlib-A)": planted,
            }
        )


def _instances(pairs, benchmark: str) -> list[TestInstance]:
    instances = []
    for name, text in pairs:
        first, _, rest = text.partition("\n")
        if rest.strip():
            instances.append(TestInstance(name, first, (rest.strip(),), benchmark))
    return instances


def overlap_study(study: OverlapStudy) -> tuple[OverlapReport, tuple[list[str], list[list]]]:
    """The overlap report and a planted-contamination table (recall on planted instances,
    the overlap rate of the others)."""
    train, held_a, held_b = split_corpus(stdlib_docstrings(), (0.6, 0.2, 0.2), seed=study.seed)
    instances = _instances(held_a, "stdlib-A") + _instances(held_b, "stdlib-B")
    generator = torch.Generator().manual_seed(study.seed)
    candidates = [i for i in instances if i.benchmark == "stdlib-A"]
    count = round(study.planted_fraction * len(candidates))
    planted = [candidates[j] for j in torch.randperm(len(candidates), generator=generator)[:count]]
    documents = [text for _, text in train]
    documents += [f"{i.input}\n{i.references[0]}" for i in planted]
    options = OverlapOptions(n=study.n, tokenizer=study.tokenizer)
    report = compute_overlap(instances, documents, options)
    planted_ids = {(i.benchmark, i.id) for i in planted}
    columns = ["benchmark", "instances", "planted", "planted flagged", "others flagged"]
    rows = []
    for benchmark in ("stdlib-A", "stdlib-B"):
        mine = [r for r in report.rows if r["benchmark"] == benchmark]
        hit = [(r["benchmark"], r["id"]) in planted_ids for r in mine]
        flagged = [r["any_overlap"] > 0 for r in mine]
        n_planted = sum(hit)
        recall = (
            sum(f for f, h in zip(flagged, hit) if h) / n_planted if n_planted else float("nan")
        )
        others = [f for f, h in zip(flagged, hit) if not h]
        rows.append(
            [
                benchmark,
                len(mine),
                n_planted,
                f"{recall:.4f}",
                f"{sum(others) / len(others):.4f}",
            ]
        )
    return report, (columns, rows)
