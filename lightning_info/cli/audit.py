"""``lightning-info audit``: a membership audit of a fine-tuned causal LM on a user's files.

The texts the model was fine-tuned on (members) and texts of the same kind it never saw
(non-members) are scored with the model's teacher-forced token log-probabilities
(:func:`~lightning_info.methods.prism.functional.fragment_token_statistics`, one forward pass per
batch); each membership attack ranks the texts, and the report gives its ROC-AUC with a bootstrap
standard error, its PR AUC and its true-positive rate at low false-positive rates under both
conventions, interpolated (:func:`~lightning_info.functional.attack_metrics`) and at most the
level (LiRA's; :mod:`~lightning_info.methods.prism.statistics`), beside a blind baseline that
reads the texts alone (:mod:`~lightning_info.methods.prism.blind`). The attacks are those of
:class:`~lightning_info.methods.prism.FragmentAuditor` that need no shadow or world model: the
target's log-probability, loss, zlib, Min-K% and Min-K%++, with a reference model the
reference-model attack and, on request, gradient norm, ReCaLL and DC-PDD
(:func:`~lightning_info.methods.prism.extra_attacks.extra_attack_scores`).
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
MIMIR_JSON = "mimir.json"
EXTRA_ATTACKS = ("gradnorm", "recall", "dc_pdd")
"""The extra attacks the command runs on request (the neighbourhood attack needs a mask filler
model, which only :class:`~lightning_info.methods.prism.FragmentAuditor` takes)."""
BLIND_FOLDS = 5
"""Cross-validation folds of the blind baseline (each file needs at least this many texts)."""
SEED = 0
"""Seeds the bootstrap, the blind baseline's folds and ReCaLL's choice of prefix texts."""
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
    extra_attacks: list[str] | None = None,
    bootstrap_resamples: int = 1000,
) -> int:
    """Audit a fine-tuned causal LM for membership: does it tell its training texts apart?

    Prints the report (one row per attack: ROC-AUC ± its bootstrap standard error, PR AUC, the
    TPR at each FPR level interpolated on the ROC curve and at most the level, LiRA's
    convention, ``n/a`` where there are too few non-members to measure it, and whether the
    attack beats the blind baseline; then the blind baseline, a distribution check of the two
    files and the counts) and writes it, each file atomically, to ``<output_dir>/audit.json``,
    ``<output_dir>/audit.md`` and, in MIMIR's results layout, ``<output_dir>/mimir.json``.
    Every input is checked before anything is written.

    The blind baseline is a text-only classifier (TF-IDF of word and character n-grams,
    logistic regression, 5-fold out-of-fold) on the same texts, prompt included; an attack
    beats it when its AUC exceeds the blind AUC by more than its own standard error. It runs
    when each file holds at least 5 texts.

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
        extra_attacks: more attacks on the model, any of ``gradnorm`` (one backward pass per
            text), ``recall`` (ReCaLL; 5 non-member texts form its prefix and are not scored by
            it) and ``dc_pdd`` (DC-PDD, token frequencies of the non-member texts).
        bootstrap_resamples: resamples of the bootstrap behind each AUC's standard error
            (at least 2; MIMIR's 1000).
    """
    folder = output_folder(output_dir)
    levels = _levels(FPR_LEVELS if fpr_levels is None else fpr_levels)
    if isinstance(min_k, bool) or not isinstance(min_k, (int, float)) or not 0 < min_k <= 1:
        raise BadInput(f"min_k must be a share of tokens in (0, 1], got {min_k!r}.")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise BadInput(f"batch_size must be an integer >= 1, got {batch_size!r}.")
    extras = _extra_attacks(extra_attacks)
    resamples = bootstrap_resamples
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 2:
        raise BadInput(f"bootstrap_resamples must be an integer >= 2, got {resamples!r}.")
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
    from lightning_info.methods.prism.extra_attacks import RECALL_SHOTS

    if "recall" in extras and labels.count(0) <= RECALL_SHOTS:
        raise BadInput(
            f"{files['non-members']}: recall takes {RECALL_SHOTS} non-member texts as its prefix "
            f"and needs more to score; {labels.count(0)} given."
        )
    scores = membership_scores(loaded, prompts, texts, float(min_k), batch_size, extras, labels)
    report = _report(scores, labels, levels, files, folders, float(min_k), resamples)
    report.update(_blind(prompts, texts, labels))
    report["beats_blind"] = _beats_blind(report)
    table = report_markdown(report)
    _write(folder, report, table)
    print(table)
    print(f"wrote {folder / REPORT_JSON}, {folder / REPORT_MARKDOWN} and {folder / MIMIR_JSON}")
    return 0


def _extra_attacks(names: Any) -> tuple[str, ...]:
    if names is None:
        return ()
    if isinstance(names, (str, bytes)) or not isinstance(names, (list, tuple)):
        raise BadInput(f"extra_attacks must be a list of names from {list(EXTRA_ATTACKS)}.")
    for name in names:
        if name == "neighbourhood":
            raise BadInput(
                "extra_attacks: the neighbourhood attack needs a mask filler model, which this "
                "command does not take; run FragmentAuditor(..., mask_filler=...) from Python."
            )
        if name not in EXTRA_ATTACKS:
            raise BadInput(
                f"extra_attacks: unknown attack {name!r}; choose from {list(EXTRA_ATTACKS)}."
            )
    if len(set(names)) < len(names):
        raise BadInput(f"extra_attacks names an attack twice: {list(names)}.")
    return tuple(names)


def _write(folder: Path, report: dict[str, Any], table: str) -> None:
    """The report as JSON, as Markdown and in MIMIR's layout, each written atomically."""
    from lightning_info.core.files import atomic_write_text
    from lightning_info.methods.prism.statistics import mimir_layout

    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / REPORT_JSON, json.dumps(report, indent=1) + "\n")
    atomic_write_text(folder / REPORT_MARKDOWN, table + "\n")
    mimir = mimir_layout(report["statistics"])
    atomic_write_text(folder / MIMIR_JSON, json.dumps(mimir, indent=1) + "\n")


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
    extra_attacks: tuple[str, ...] = (),
    labels: list[int] | None = None,
) -> dict[str, Any]:
    """Every attack's scores of the texts (float64 arrays, higher = more likely a member; NaN
    where an attack does not score a text): ``loaded["model"]`` and, when present,
    ``loaded["reference"]``, each ``(model, tokenizer)``; ``extra_attacks`` of
    :data:`EXTRA_ATTACKS` need the ``labels`` (1 member, 0 non-member)."""
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
    if extra_attacks:
        from lightning_info.methods.prism.auditor import FragmentAuditOptions
        from lightning_info.methods.prism.extra_attacks import extra_attack_scores

        options = FragmentAuditOptions(
            batch_size=batch_size, seed=SEED, extra_attacks=extra_attacks
        )
        scores |= extra_attack_scores(
            model, tokenizer, prompts, texts, labels, options, target_log_probs=log_probs
        )
    return {name: _array(values) for name, values in scores.items()}


def _array(values: Any) -> Any:
    import numpy as np

    return np.asarray(values, dtype=np.float64)


def _report(scores, labels, levels, files, folders, min_k, resamples) -> dict[str, Any]:
    """The JSON report: ``attacks`` (today's figures: AUC, interpolated TPRs), ``statistics``
    (:func:`~lightning_info.methods.prism.statistics.membership_report` rows: AUC s.e., PR AUC,
    both TPR conventions, integer counts), the counts. An attack is measured on the texts it
    scored."""
    import numpy as np

    from lightning_info.methods.prism.functional import attack_metrics, negatives_for_fpr
    from lightning_info.methods.prism.statistics import membership_report

    y = np.asarray(labels)
    attacks, statistics = {}, {}
    stat_levels = tuple(level for level in levels if level < 1.0) or (0.001, 0.01)
    for name, values in scores.items():
        scored = ~np.isnan(values)
        attacks[name] = attack_metrics(values[scored], y[scored], levels)
        statistics[name] = membership_report(
            {name: values[scored]}, y[scored], stat_levels, resamples, SEED
        )[name]
    non_members = labels.count(0)
    return {
        "format": REPORT_FORMAT,
        "model": str(folders["model"]),
        "reference": str(folders["reference"]) if "reference" in folders else None,
        "members": str(files["members"]),
        "non_members": str(files["non-members"]),
        "min_k": min_k,
        "fpr_levels": list(levels),
        "bootstrap_resamples": resamples,
        "attacks": attacks,
        "statistics": statistics,
        "counts": {
            "members": labels.count(1),
            "non-members": non_members,
            **{
                f"non-members needed for tpr@{100 * level:g}%fpr": negatives_for_fpr(level)
                for level in levels
            },
        },
    }


def _blind(prompts: list[str], texts: list[str], labels: list[int]) -> dict[str, Any]:
    """``blind`` (the blind baseline's AUC, s.e., folds) and ``distribution`` (n-gram overlaps,
    the length test) of the member against the non-member texts, prompt included; both None
    when a file holds fewer than :data:`BLIND_FOLDS` texts."""
    from lightning_info.methods.prism.blind import distribution_check

    whole = [p + t for p, t in zip(prompts, texts)]
    members = [t for t, label in zip(whole, labels) if label == 1]
    non_members = [t for t, label in zip(whole, labels) if label == 0]
    if min(len(members), len(non_members)) < BLIND_FOLDS:
        return {"blind": None, "distribution": None}
    check = distribution_check(members, non_members, seed=SEED, folds=BLIND_FOLDS)
    blind = {"auc": check["blind_auc"], "auc_se": check["blind_auc_se"], "folds": check["folds"]}
    names = ("overlap_7", "overlap_13", "length_u", "length_p_value")
    return {"blind": blind, "distribution": {name: check[name] for name in names}}


def _beats_blind(report: dict[str, Any]) -> dict[str, bool] | None:
    from lightning_info.methods.prism.blind import beats_blind

    if report["blind"] is None:
        return None
    blind = report["blind"]["auc"]
    return {
        name: beats_blind(row["auc"], row["auc_se"], blind)
        for name, row in report["statistics"].items()
    }


def report_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown: the attacks' table (AUC and its s.e., PR AUC, the TPR at each
    level interpolated and at most the level, 4 decimals; ``n/a (needs >= N negatives)`` where
    the attack has fewer non-members than the level needs; integer counts; whether it beats the
    blind baseline), the blind baseline and the distribution check, then the counts."""
    from lightning_info.core.logging import markdown_table
    from lightning_info.methods.prism.statistics import format_rate

    attacks, statistics = report["attacks"], report["statistics"]
    levels = report["fpr_levels"]
    beats = report.get("beats_blind")
    columns = ["attack", "AUC", "AUC s.e.", "PR AUC"]
    columns += [f"TPR@{100 * level:g}%FPR" for level in levels]
    columns += [f"TPR@{100 * level:g}%FPR at most" for level in levels]
    columns += ["members", "non-members"] + (["beats blind"] if beats else [])
    rows = []
    for attack, metrics in attacks.items():
        row = statistics[attack]
        negatives = int(row["non_members"])
        cells = [attack, f"{metrics['auc']:.4f}", f"{row['auc_se']:.4f}", f"{row['pr_auc']:.4f}"]
        cells += [
            format_rate(metrics[f"tpr@{100 * level:g}%fpr"], negatives, level) for level in levels
        ]
        cells += [format_rate(_at_most(row, level), negatives, level) for level in levels]
        cells += [str(int(row["members"])), str(negatives)]
        if beats:
            cells.append("yes" if beats[attack] else "no")
        rows.append(cells)
    counts = report["counts"]
    reference = f", reference model {report['reference']}" if report["reference"] else ""
    lines = [
        f"Membership audit of {report['model']}{reference}: members {report['members']}, "
        f"non-members {report['non_members']} (higher score = member)",
        "TPR@x%FPR: interpolated on the ROC curve; 'at most': the best threshold whose FPR is at "
        "most x% (LiRA's convention); n/a where there are fewer non-members than the level "
        f"needs. AUC s.e.: {report['bootstrap_resamples']} bootstrap resamples.",
        "",
        markdown_table(columns, rows),
        "",
    ]
    blind = report.get("blind")
    if blind is None:
        lines.append(
            f"blind baseline: not run (it needs >= {BLIND_FOLDS} texts in each file for its "
            f"{BLIND_FOLDS}-fold cross-validation)"
        )
    else:
        losers = [name for name, won in beats.items() if not won]
        d = report["distribution"]
        lines += [
            f"blind baseline (texts alone, {blind['folds']}-fold TF-IDF logistic regression): "
            f"AUC {blind['auc']:.4f} ± {blind['auc_se']:.4f}; attacks that do not beat it by "
            f"more than their s.e.: {', '.join(losers) if losers else 'none'}",
            f"distribution check: shared word 7-grams {d['overlap_7']:.4f}, 13-grams "
            f"{d['overlap_13']:.4f} (share of non-members with one); lengths in words, "
            f"Mann-Whitney U {d['length_u']:.1f}, p = {d['length_p_value']:.4f}",
        ]
    lines += ["", markdown_table(["count", "value"], counts.items())]
    return "\n".join(lines)


def _at_most(row: dict[str, Any], level: float) -> float:
    return 1.0 if level >= 1.0 else float(row[f"tpr_at_{100 * level:g}pct_fpr_at_most"])
