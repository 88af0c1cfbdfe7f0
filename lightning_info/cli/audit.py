"""``lightning-info audit``: a membership audit of a fine-tuned causal LM on a user's files.

The texts the model was fine-tuned on (members) and texts of the same kind it never saw
(non-members) are scored with the model's teacher-forced token log-probabilities
(:func:`~lightning_info.methods.prism.functional.fragment_token_statistics`, one forward pass per
batch); each membership attack ranks the texts, and the report gives its ROC-AUC and its
true-positive rate at low false-positive rates (:func:`~lightning_info.functional.attack_metrics`).
The attacks are those of :class:`~lightning_info.methods.prism.FragmentAuditor` that need no
shadow or world model: the target's log-probability, loss, zlib, Min-K% and Min-K%++, and, with a
reference model, the reference-model attack.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lightning_info.cli import BadInput
from lightning_info.cli.records import (
    RecordText,
    load_model,
    model_folder,
    model_positions,
    output_folder,
    read_records,
)

REPORT_JSON = "audit.json"
REPORT_MARKDOWN = "audit.md"
REPORT_FORMAT = "lightning-info/membership-audit"
FPR_LEVELS = (0.001, 0.01, 0.02, 0.05)
"""The false-positive rates of the report: the field's 0.1% and 1%, PRISM's 2% and 5%."""


def audit(
    model: str,
    members: str,
    non_members: str,
    output_dir: str,
    reference: str | None = None,
    text_field: str | None = None,
    fields: list[str] | None = None,
    template: str | None = None,
    prompt_template: str | None = None,
    min_k: float = 0.2,
    fpr_levels: list[float] | None = None,
    batch_size: int = 16,
    device: str | None = None,
) -> int:
    """Audit a fine-tuned causal LM for membership: does it tell its training texts apart?

    Prints the report (one row per attack: ROC-AUC and the TPR at each FPR level; then the
    counts) and writes it, each file atomically, to ``<output_dir>/audit.json`` and
    ``<output_dir>/audit.md``. Every input is checked before anything is written.

    Args:
        model: the fine-tuned model, a local folder written by save_pretrained (a causal LM and
            its tokenizer).
        members: a JSON-lines file of texts the model was fine-tuned on, one JSON object per
            non-blank line.
        non_members: a JSON-lines file of texts of the same kind the model never saw.
        output_dir: the folder (created if absent) that receives the report as ``audit.json``
            and ``audit.md``.
        reference: a reference model's folder (e.g. the base model before fine-tuning), scored
            with its own tokenizer, for the reference-model attack; none: no such attack.
        text_field: the field holding the text (default ``text``).
        fields: several fields, joined with a newline, form the text.
        template: a template of named fields forms the text, e.g. ``"{prompt}\\n{response}"``.
        prompt_template: a template of named fields forming a prompt the text is scored after
            (its tokens are not scored), e.g. ``"{instruction}"``; none: the text is scored after
            the tokenizer's bos (else eos) token.
        min_k: the share of lowest-scoring tokens Min-K% and Min-K%++ keep, in (0, 1].
        fpr_levels: false-positive rates at which the TPR is reported, each in (0, 1]; none:
            0.1%, 1%, 2% and 5%.
        batch_size: texts per forward pass.
        device: where the models run (``cpu``, ``cuda``, ``cuda:1``); none: a GPU if present.
    """
    folder = output_folder(output_dir)
    levels = _levels(FPR_LEVELS if fpr_levels is None else fpr_levels)
    if isinstance(min_k, bool) or not isinstance(min_k, (int, float)) or not 0 < min_k <= 1:
        raise BadInput(f"min_k must be a share of tokens in (0, 1], got {min_k!r}.")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise BadInput(f"batch_size must be an integer >= 1, got {batch_size!r}.")
    text = RecordText.from_options(text_field, fields, template, prompt_template)
    files = {"members": Path(members), "non-members": Path(non_members)}
    read = {what: read_records(path, what) for what, path in files.items()}
    queries = {what: text.read(read[what], files[what]) for what in files}
    _refuse_shared(queries, read, files)
    folders = {"model": model_folder(model, "model")}
    if reference is not None:
        folders["reference"] = model_folder(reference, "reference")
    loaded = {what: load_model(path, what, device) for what, path in folders.items()}
    prompts = queries["members"][0] + queries["non-members"][0]
    texts = queries["members"][1] + queries["non-members"][1]
    where = [(files[what], line) for what in files for line, _ in read[what]]
    for what, (lm, tokenizer) in loaded.items():
        _check_encodings(lm, tokenizer, prompts, texts, where, what)
    labels = [1] * len(read["members"]) + [0] * len(read["non-members"])
    scores = membership_scores(loaded, prompts, texts, float(min_k), batch_size)
    report = _report(scores, labels, levels, files, folders, float(min_k))
    table = report_markdown(report)
    _write(folder, report, table)
    print(table)
    print(f"wrote {folder / REPORT_JSON} and {folder / REPORT_MARKDOWN}")
    return 0


def _write(folder: Path, report: dict[str, Any], table: str) -> None:
    """The report as JSON and as Markdown, each written atomically."""
    from lightning_info.core.files import atomic_write_text

    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / REPORT_JSON, json.dumps(report, indent=1) + "\n")
    atomic_write_text(folder / REPORT_MARKDOWN, table + "\n")


def _levels(levels: Any) -> tuple[float, ...]:
    if isinstance(levels, (str, bytes)) or not isinstance(levels, (list, tuple)) or not levels:
        raise BadInput(f"fpr_levels must be a non-empty list of rates in (0, 1], got {levels!r}.")
    for level in levels:
        if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level <= 1:
            raise BadInput(f"fpr_levels must hold rates in (0, 1], got {level!r}.")
    return tuple(float(level) for level in levels)


def _refuse_shared(queries, read, files) -> None:
    """Refuse a (prompt, text) pair given both as a member and as a non-member."""
    seen = {}
    for (line, _), pair in zip(read["members"], zip(*queries["members"])):
        seen.setdefault(pair, line)
    for (line, _), pair in zip(read["non-members"], zip(*queries["non-members"])):
        if pair in seen:
            raise BadInput(
                f"{files['non-members']}, line {line} holds the text of {files['members']}, line "
                f"{seen[pair]}: a text is either trained on or held out; remove one of them."
            )


def _check_encodings(model, tokenizer, prompts, texts, where, what) -> None:
    """Refuse a text the model cannot score (no tokens, or more than its positions with its
    prompt), naming the file and line."""
    from lightning_info.methods.prism.functional import encode_prompt_fragment

    positions = model_positions(model)
    for prompt, text, (path, line) in zip(prompts, texts, where):
        try:
            ids, _ = encode_prompt_fragment(tokenizer, prompt, text)
        except ValueError as err:
            raise BadInput(f"{path}, line {line}: {err}") from None
        if positions is not None and len(ids) > positions:
            raise BadInput(
                f"{path}, line {line}: the prompt and text take {len(ids)} tokens of the {what}'s "
                f"tokenizer, more than its {positions} positions; shorten the text."
            )


def membership_scores(
    loaded: dict[str, tuple[Any, Any]],
    prompts: list[str],
    texts: list[str],
    min_k: float,
    batch_size: int,
) -> dict[str, Any]:
    """Every attack's scores of the texts (float64 arrays, higher = more likely a member):
    ``loaded["model"]`` and, when present, ``loaded["reference"]``, each ``(model, tokenizer)``."""
    from lightning_info.methods.prism.attacks import (
        loss_score,
        min_k_plus_plus_score,
        min_k_score,
        zlib_score,
    )
    from lightning_info.methods.prism.functional import fragment_token_statistics

    model, tokenizer = loaded["model"]
    tokens = fragment_token_statistics(model, tokenizer, prompts, texts, batch_size)
    log_probs = tokens.log_probs
    scores = {
        "target": [float(row.sum()) for row in log_probs],
        "loss": loss_score(log_probs),
        "zlib": zlib_score(log_probs, texts),
        "min_k": min_k_score(log_probs, min_k),
        "min_k++": min_k_plus_plus_score(log_probs, tokens.means, tokens.stds, min_k),
    }
    if "reference" in loaded:
        reference, reference_tokenizer = loaded["reference"]
        other = fragment_token_statistics(
            reference, reference_tokenizer, prompts, texts, batch_size, vocabulary_moments=False
        )
        # reference_ratio_score's value, per-token means, so the tokenizers may differ
        scores["reference"] = loss_score(log_probs) - loss_score(other.log_probs)
    return {name: _array(values) for name, values in scores.items()}


def _array(values: Any) -> Any:
    import numpy as np

    return np.asarray(values, dtype=np.float64)


def _report(scores, labels, levels, files, folders, min_k) -> dict[str, Any]:
    from lightning_info.methods.prism.functional import attack_metrics, negatives_for_fpr

    attacks = {name: attack_metrics(values, labels, levels) for name, values in scores.items()}
    non_members = labels.count(0)
    return {
        "format": REPORT_FORMAT,
        "model": str(folders["model"]),
        "reference": str(folders["reference"]) if "reference" in folders else None,
        "members": str(files["members"]),
        "non_members": str(files["non-members"]),
        "min_k": min_k,
        "fpr_levels": list(levels),
        "attacks": attacks,
        "counts": {
            "members": labels.count(1),
            "non-members": non_members,
            **{
                f"non-members needed for tpr@{100 * level:g}%fpr": negatives_for_fpr(level)
                for level in levels
            },
        },
    }


def report_markdown(report: dict[str, Any]) -> str:
    """The report as two Markdown tables: the attacks' metrics (4 decimals) and the counts
    (integers), with a line for each FPR level that has too few non-members to be measured."""
    from lightning_info.core.logging import markdown_table

    attacks = report["attacks"]
    names = list(next(iter(attacks.values())))
    columns = ["attack", *(_column(name) for name in names)]
    rows = [[attack, *(f"{m[name]:.4f}" for name in names)] for attack, m in attacks.items()]
    counts = report["counts"]
    reference = f", reference model {report['reference']}" if report["reference"] else ""
    lines = [
        f"Membership audit of {report['model']}{reference}: members {report['members']}, "
        f"non-members {report['non_members']} (higher score = member)",
        "",
        markdown_table(columns, rows),
        "",
        markdown_table(["count", "value"], counts.items()),
    ]
    available = counts["non-members"]
    short = [
        (level, needed)
        for level in report["fpr_levels"]
        if available < (needed := counts[f"non-members needed for tpr@{100 * level:g}%fpr"])
    ]
    if short:
        rates = ", ".join(f"{100 * level:g}%" for level, _ in short)
        needed = ", ".join(str(n) for _, n in short)
        lines += [
            "",
            f"The TPR at {rates} FPR is read off the ROC curve's first step: measuring it needs "
            f"{needed} non-members, {available} given.",
        ]
    return "\n".join(lines)


def _column(name: str) -> str:
    return "AUC" if name == "auc" else name.upper()
