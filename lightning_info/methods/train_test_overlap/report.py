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
    """Per-instance metrics (``rows``) and per-benchmark means (``summary``) of one overlap run.

    ``undetectable`` lists the instances (``{"benchmark", "id"}``) whose text yields no n-gram
    of size ``n`` under the tokenizer (fewer than ``n`` tokens in the input, in every reference
    and across the two; text without spaces, such as Chinese or Japanese, is one token for the
    word tokenizers): their overlap reads 0 whatever the training data holds. ``summary`` counts
    them per benchmark (``num_undetectable``), and :meth:`to_markdown` names them.
    """

    n: int
    n_values: tuple[int, ...]
    tokenizer: str
    max_frequency: int
    num_documents: int
    num_tokens: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, dict[str, float]] = field(default_factory=dict)
    undetectable: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "n_values": list(self.n_values),
            "tokenizer": self.tokenizer,
            "max_frequency": self.max_frequency,
            "num_documents": self.num_documents,
            "num_tokens": self.num_tokens,
            "summary": self.summary,
            "undetectable": self.undetectable,
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
            undetectable=list(data.get("undetectable", [])),
        )

    def summary_table(self) -> tuple[list[str], list[list[Any]]]:
        """``(columns, rows)``: one row per benchmark with its headline means."""
        keys = ["num_instances", "num_undetectable", "any_overlap", "input_binary"]
        keys += ["references_binary"]
        keys += [f"input_overlap@{m}" for m in self.n_values]
        keys += ["input_jaccard", "input_token", "input_token_filtered", "references_token"]
        rows = []
        for benchmark, stats in self.summary.items():
            row: list[Any] = [benchmark]
            for key in keys:
                value = stats.get(key)  # a report saved without undetectable counts: "-"
                if value is None:
                    row.append("-")
                else:
                    row.append(value if key.startswith("num_") else f"{value:.4f}")
            rows.append(row)
        return ["benchmark", *keys], rows

    def to_markdown(self) -> str:
        header = (
            f"Train-test overlap: N = {self.n}, tokenizer {self.tokenizer!r}, frequency filter "
            f"<= {self.max_frequency}, {self.num_documents} training documents, "
            f"{self.num_tokens} tokens."
        )
        table = f"{header}\n\n{markdown_table(*self.summary_table())}\n"
        if not self.undetectable:
            return table
        note = undetectable_message(
            self.undetectable, len(self.rows), self.n, self.tokenizer, limit=20
        )
        return f"{table}\n{note}\n"


class UndetectableInstancesWarning(UserWarning):
    """Some test instances yield no n-gram of the report's size: their overlap reads 0 whatever
    the training data holds (:attr:`OverlapReport.undetectable` lists them)."""


def undetectable_message(
    undetectable: list[dict[str, Any]], total: int, n: int, tokenizer: str, limit: int = 5
) -> str:
    """What an overlap report says about its undetectable instances: how many, the first
    ``limit`` ids, and how to see them."""
    shown = ", ".join(f"{item['benchmark']}/{item['id']}" for item in undetectable[:limit])
    more = f" and {len(undetectable) - limit} more" if len(undetectable) > limit else ""
    return (
        f"{len(undetectable)} of {total} test instances yield no {n}-gram under tokenizer "
        f"{tokenizer!r} ({shown}{more}): their overlap reads 0 whatever the training data holds "
        "(fewer than n tokens; text without spaces, such as Chinese or Japanese, is one token). "
        'To see them, pass OverlapOptions(tokenizer="character", n=...) (character n-grams, '
        "e.g. n=50 for English, 13 for Chinese) or a smaller n."
    )


def write_report(report: OverlapReport, path: str | Path) -> tuple[Path, Path]:
    """Write ``report`` as ``<path>.json`` (everything) and ``<path>.md`` (the summary table).

    ``path`` is a file stem (a suffix ``.json``/``.md`` is dropped) or an existing folder, in
    which case the files are ``overlap.json`` and ``overlap.md`` inside it. An empty path is
    refused (name the current folder ``"."`` to write there).
    """
    if not isinstance(report, OverlapReport):
        raise TypeError(
            f"`report` must be an OverlapReport (from compute_overlap), got "
            f"{type(report).__name__}."
        )
    if not isinstance(path, (str, Path)) or not str(path):
        raise TypeError(
            f"`path` must be a non-empty file stem or folder (str or Path), got {path!r}."
        )
    path = Path(path)
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise ValueError(
                f"cannot write the report under {parent}: it is a file, not a folder; pass "
                "another path."
            )
    if path.is_dir():
        path = path / "overlap"
    if path.suffix in (".json", ".md"):
        path = path.with_suffix("")
    path.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path = path.with_suffix(".json"), path.with_suffix(".md")
    atomic_write_text(json_path, json.dumps(report.to_dict(), indent=1) + "\n")
    atomic_write_text(md_path, report.to_markdown())
    return json_path, md_path
