"""The overlap report: per-instance metrics, per-benchmark means, JSON and Markdown output."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lightning_info.core.files import atomic_write_text
from lightning_info.core.logging import markdown_table


@dataclass
class OverlapReport:
    """Per-instance metrics (``rows``) and per-benchmark means (``summary``) of one overlap run."""

    n: int
    n_values: tuple[int, ...]
    tokenizer: str
    max_frequency: int
    num_documents: int
    num_tokens: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "n_values": list(self.n_values),
            "tokenizer": self.tokenizer,
            "max_frequency": self.max_frequency,
            "num_documents": self.num_documents,
            "num_tokens": self.num_tokens,
            "summary": self.summary,
            "instances": self.rows,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OverlapReport:
        return cls(
            n=data["n"],
            n_values=tuple(data["n_values"]),
            tokenizer=data["tokenizer"],
            max_frequency=data["max_frequency"],
            num_documents=data["num_documents"],
            num_tokens=data["num_tokens"],
            rows=data["instances"],
            summary=data["summary"],
        )

    def summary_table(self) -> tuple[list[str], list[list[Any]]]:
        """``(columns, rows)``: one row per benchmark with its headline means."""
        keys = ["num_instances", "any_overlap", "input_binary", "references_binary"]
        keys += [f"input_overlap@{m}" for m in self.n_values]
        keys += ["input_jaccard", "input_token", "input_token_filtered", "references_token"]
        rows = []
        for benchmark, stats in self.summary.items():
            row: list[Any] = [benchmark]
            for key in keys:
                value = stats[key]
                row.append(value if key == "num_instances" else f"{value:.4f}")
            rows.append(row)
        return ["benchmark", *keys], rows

    def to_markdown(self) -> str:
        header = (
            f"Train-test overlap: N = {self.n}, tokenizer {self.tokenizer!r}, frequency filter "
            f"<= {self.max_frequency}, {self.num_documents} training documents, "
            f"{self.num_tokens} tokens."
        )
        return f"{header}\n\n{markdown_table(*self.summary_table())}\n"


def write_report(report: OverlapReport, path: str | Path) -> tuple[Path, Path]:
    """Write ``report`` as ``<path>.json`` (everything) and ``<path>.md`` (the summary table).

    ``path`` is a file stem (a suffix ``.json``/``.md`` is dropped) or an existing folder, in
    which case the files are ``overlap.json`` and ``overlap.md`` inside it.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "overlap"
    if path.suffix in (".json", ".md"):
        path = path.with_suffix("")
    path.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path = path.with_suffix(".json"), path.with_suffix(".md")
    atomic_write_text(json_path, json.dumps(report.to_dict(), indent=1) + "\n")
    atomic_write_text(md_path, report.to_markdown())
    return json_path, md_path
