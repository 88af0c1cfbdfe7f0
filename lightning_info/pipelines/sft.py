"""The fine-tuning pipeline's glue: a FisherSFT data module that decontaminates its pool first,
and a callback that reports every stage's figures as test metrics.

The stages are the suite's plugins, attached as a user attaches them:

1. decontaminate: :class:`SFTPipelineDataModule` flags the candidate examples that share an
   n-gram with the test set
   (:func:`~lightning_info.methods.train_test_overlap.functional.contaminated_documents`) and,
   with ``decontaminate=True``, drops them from the pool; the
   :class:`~lightning_info.methods.train_test_overlap.callback.TrainTestOverlap` callback logs
   the overlap report of the examples the train loader draws (a W&B table);
2. select: the data module is a
   :class:`~lightning_info.methods.fisher_sft.datamodule.FisherSubsetDataModule`, so FisherSFT
   (or the random baseline) picks ``budget`` examples of the decontaminated pool;
3. train: :class:`~lightning_info.lm.fine_tuner.CausalLMFineTuner` with LoRA, and the
   :class:`~lightning_info.methods.fic_tsc.callback.FisherConstraint` callback;
4. audit: the
   :class:`~lightning_info.methods.prism.callback.FragmentExtractionAudit` callback at fit end,
   and :class:`SFTPipelineReport` at test time: the loss on the clean and on the contaminated
   test items, the share of test items whose n-grams reached the selected training set, the
   share of constrained steps and the audit's figures, logged as ``test/...`` metrics (so that
   ``ComparisonCLI`` tables them).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from torch.utils.data import DataLoader

from lightning_info.core.files import read_json_or_lines
from lightning_info.core.logging import metric_key
from lightning_info.core.validation import require_bool, require_string_sequence
from lightning_info.methods.fic_tsc.callback import FisherConstraint
from lightning_info.methods.fisher_sft.datamodule import (
    FisherSubsetDataModule,
    PromptResponseColumns,
    SubsetSelectionOptions,
)
from lightning_info.methods.fisher_sft.sampler import FisherSubsetSampler
from lightning_info.methods.prism.auditor import ATTACKS
from lightning_info.methods.prism.callback import FragmentExtractionAudit
from lightning_info.methods.train_test_overlap.functional import (
    OverlapOptions,
    TestInstance,
    compute_overlap,
    contaminated_documents,
)

__all__ = [
    "ContaminationScan",
    "SFTPipelineDataModule",
    "SFTPipelineReport",
    "audit_metric_name",
    "load_examples",
]

TRAINING_SEPARATOR = "\n"
"""What joins prompt and response in training (``tokenize_prompt_response``'s default): the
``text`` column of the pool is the text the model is trained on."""
TEST_BENCHMARK = "test"
"""The benchmark name of the test items (the split ``TrainTestOverlap`` reads them from)."""


def load_examples(path: str | Path) -> Any:
    """A ``datasets.Dataset`` from a folder written by ``save_to_disk``, a JSON-lines file (one
    object per line) or a JSON file holding a list of objects (a UTF-8 BOM is fine).

    A syntax error names the file, line and column; a line that is not an object, and a column
    whose values have different types (a number among strings, a list among strings), name the
    file, the column and a row of each type."""
    import datasets

    path = Path(path)
    if path.is_dir():
        loaded = datasets.load_from_disk(str(path))
        if isinstance(loaded, datasets.DatasetDict):
            raise ValueError(f"{path} holds a DatasetDict; save the one split to use.")
        return loaded
    if not path.is_file():
        raise FileNotFoundError(f"{path} is neither a saved dataset folder nor a file.")
    rows = read_json_or_lines(path)
    if isinstance(rows, dict):
        rows = [rows]
    if not rows:
        raise ValueError(f"{path} holds no JSON lines.")
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise ValueError(
                f"{path}, example {number}: expected a JSON object such as "
                f'{{"prompt": ..., "response": ...}}, got {type(row).__name__} {row!r:.60}.'
            )
    _require_one_type_per_column(rows, path)
    return datasets.Dataset.from_list(rows)


def _kind(value: Any) -> str:
    """The type of a JSON value as a column holds it (ints and floats are both numbers)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, numbers.Number):
        return "number"
    return {str: "string", list: "list", dict: "object"}.get(type(value), type(value).__name__)


def _require_one_type_per_column(rows: list[dict], path: Path) -> None:
    """Raise, naming the column, unless every column's non-null values share one JSON type (a
    ``datasets`` column has one type; Arrow's own error names neither column nor row)."""
    first_of: dict[str, dict[str, int]] = {}
    for number, row in enumerate(rows, start=1):
        for column, value in row.items():
            if value is not None:
                first_of.setdefault(column, {}).setdefault(_kind(value), number)
    for column, kinds in first_of.items():
        if len(kinds) > 1:
            seen = ", ".join(f"{kind} (first at example {n})" for kind, n in kinds.items())
            raise ValueError(
                f"{path}: column {column!r} mixes value types: {seen}. A column holds one type: "
                "make its values all of one type (e.g. quote the numbers as strings), or drop "
                "the column."
            )


def _with_text(dataset: Any, columns: PromptResponseColumns) -> Any:
    """``dataset`` with a ``text`` column: each example's prompt and response as trained on."""
    prompts, responses = dataset[columns.prompt_column], dataset[columns.response_column]
    texts = [f"{p}{TRAINING_SEPARATOR}{r}" for p, r in zip(prompts, responses)]
    return _set_column(dataset, "text", texts)


def _conform(extra: Any, pool: Any) -> Any:
    """``extra`` with exactly ``pool``'s columns and types (those it lacks are empty), so that
    the two concatenate."""
    extra = extra.select_columns([c for c in extra.column_names if c in pool.column_names])
    for name in pool.column_names:
        if name not in extra.column_names:
            extra = extra.add_column(name, [None] * len(extra))
    return extra.select_columns(pool.column_names).cast(pool.features)


def _set_column(dataset: Any, name: str, values: list) -> Any:
    if name in dataset.column_names:
        if dataset[name] == values:
            return dataset
        dataset = dataset.remove_columns(name)
    return dataset.add_column(name, values)


EMBED_32 = SubsetSelectionOptions(embed_batch_size=32)
"""The default selection options: 32 pool examples per embedding pass."""
PROMPT_RESPONSE = PromptResponseColumns()
"""The default columns: ``prompt`` and ``response``, no chat template."""


@dataclass(frozen=True)
class ContaminationScan:
    """What the n-gram scan of the whole candidate pool against the test set found:
    ``pool_flags[i]``, candidate ``i`` shares an n-gram with a test item;
    ``test_flags[j]``, test item ``j`` shares one with some candidate (the contaminated
    subset of the test set)."""

    pool_flags: np.ndarray
    test_flags: np.ndarray


class SFTPipelineDataModule(FisherSubsetDataModule):
    """FisherSFT (or random) selection at ``budget`` from a pool decontaminated against the test
    set; the test set is served whole, and split into its clean and contaminated items.

    ``pool`` and ``test_set`` are prompt/response instruction sets on disk (a ``save_to_disk``
    folder or JSON lines, :func:`load_examples`); ``tokenizer`` a Hugging Face name or folder.
    ``always_train`` (optional, same format) holds examples every arm trains on: they join the
    training set after the selection, are no candidates (neither scanned, removed nor counted in
    ``budget``), and are served after the pool's rows (indices ``len(pool)`` onwards). Planted
    canaries go there, so that the audit's members are members whatever the selection.
    At the first ``setup`` every candidate is scanned for ``overlap.n``-grams of the test items
    (input: the prompt, reference: the response;
    :func:`~lightning_info.methods.train_test_overlap.functional.contaminated_documents`), and
    the test items sharing one with the pool make the contaminated subset. With
    ``decontaminate`` the flagged candidates leave the pool before the selection.

    For :class:`~lightning_info.methods.train_test_overlap.callback.TrainTestOverlap` the pool
    gets a ``text`` column (prompt and response) and the test set ``input``, ``references`` and
    ``id`` columns: the callback's defaults read them (with ``splits: [test]``). The other
    arguments are :class:`FisherSubsetDataModule`'s.
    """

    def __init__(
        self,
        tokenizer: str,
        pool: str,
        test_set: str,
        budget: int,
        strategy: Literal["fisher", "random", "k_center"] = "fisher",
        decontaminate: bool = True,
        overlap: OverlapOptions = OverlapOptions(),
        selection_options: SubsetSelectionOptions = EMBED_32,
        columns: PromptResponseColumns = PROMPT_RESPONSE,
        max_length: int = 192,
        batch_size: int = 8,
        seed: int = 0,
        always_train: str | None = None,
    ) -> None:
        from lightning_info.lm.tiny_lm import load_tokenizer

        if not isinstance(overlap, OverlapOptions):
            raise TypeError(f"`overlap` must be an OverlapOptions, got {type(overlap).__name__}.")
        require_bool(decontaminate, "decontaminate")
        loaded = load_tokenizer(tokenizer)
        if loaded.pad_token is None:
            loaded.pad_token = loaded.eos_token
        candidates, tests = load_examples(pool), load_examples(test_set)
        extra = load_examples(always_train) if always_train is not None else None
        if extra is not None and len(extra) == 0:
            raise ValueError(f"`always_train` ({always_train}) holds no examples.")
        for name, data in (("pool", candidates), ("test_set", tests), ("always_train", extra)):
            if data is None:
                continue
            missing = {columns.prompt_column, columns.response_column} - set(data.column_names)
            if missing:
                raise ValueError(f"`{name}` lacks column(s) {sorted(missing)}.")
        prompts, responses = tests[columns.prompt_column], tests[columns.response_column]
        self.test_instances = [
            TestInstance(str(j), p, (r,), TEST_BENCHMARK)
            for j, (p, r) in enumerate(zip(prompts, responses))
        ]
        tests = _set_column(tests, "input", prompts)
        tests = _set_column(tests, "references", [[r] for r in responses])
        tests = _set_column(tests, "id", [i.id for i in self.test_instances])
        candidates = _with_text(candidates, columns)
        super().__init__(
            candidates,
            loaded,
            budget,
            strategy,
            selection_options=selection_options,
            eval_dataset=tests,
            columns=columns,
            max_length=max_length,
            batch_size=batch_size,
            seed=seed,
            progress=False,
        )
        self.candidates = candidates
        """The pool as given (``self.pool``: what is left after decontamination, then the
        ``always_train`` examples)."""
        self.always_train = (
            None if extra is None else _conform(_with_text(extra, columns), candidates)
        )
        self.num_kept_candidates: int | None = None
        """The candidates left after decontamination (the rows of ``self.pool`` before the
        ``always_train`` examples)."""
        self.decontaminate = decontaminate
        self.overlap = overlap
        self.scan: ContaminationScan | None = None
        self._leak: float | None = None

    def _scan(self) -> ContaminationScan:
        texts = self.candidates["text"]
        pool_flags = contaminated_documents(self.test_instances, texts, self.overlap)
        report = compute_overlap(self.test_instances, texts, self.overlap)
        leaked = {row["id"] for row in report.rows if row["any_overlap"] > 0}
        test_flags = np.array([i.id in leaked for i in self.test_instances], dtype=bool)
        return ContaminationScan(pool_flags, test_flags)

    def setup(self, stage: str) -> None:
        if self.scan is None:
            self.scan = self._scan()
            if self.decontaminate:
                kept = np.flatnonzero(~self.scan.pool_flags).tolist()
                if len(kept) < self.budget:
                    raise ValueError(
                        f"Decontamination leaves {len(kept)} candidates, fewer than "
                        f"budget={self.budget}; lower the budget or grow the pool."
                    )
                self.pool = self.candidates.select(kept)
            self.num_kept_candidates = len(self.pool)
        fresh = stage == "fit" and self.selection is None
        super().setup(stage)
        if fresh and self.always_train is not None:
            self._append_always_train()

    def served_count(self) -> int:
        """The ``budget`` selected, then the ``always_train`` examples."""
        extra = 0 if self.always_train is None else len(self.always_train)
        return self.budget + extra

    def _append_always_train(self) -> None:
        import datasets

        first = self.num_kept_candidates
        self.pool = datasets.concatenate_datasets([self.pool, self.always_train])
        indices = [*self.selection.indices, *range(first, len(self.pool))]
        self.selection = replace(self.selection, indices=indices, pool_size=len(self.pool))
        self.sampler = FisherSubsetSampler(indices, seed=self.seed)
        self.sampler.selection = self.selection

    def selected_texts(self) -> list[str]:
        """The texts of the training examples: the selected ones, then the ``always_train``
        ones (after ``setup("fit")`` or a resume)."""
        if self.selection is None:
            raise RuntimeError("Nothing is selected yet: call setup('fit') first.")
        return [self.pool[int(i)]["text"] for i in self.selection.indices]

    def leaked_fraction(self) -> float:
        """The share of test items sharing an ``overlap.n``-gram with the training examples
        (HELM's ``any_overlap``, :func:`compute_overlap`)."""
        if self._leak is None:
            report = compute_overlap(self.test_instances, self.selected_texts(), self.overlap)
            self._leak = float(report.summary[TEST_BENCHMARK]["any_overlap"])
        return self._leak

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self._leak = None

    def test_subset_loader(self, contaminated: bool) -> DataLoader | None:
        """Batches of the contaminated (or the clean) test items; ``None`` when there are none."""
        if self.scan is None:
            self.setup("test")
        flags = self.scan.test_flags if contaminated else ~self.scan.test_flags
        rows = np.flatnonzero(flags).tolist()
        if not rows:
            return None
        subset = self.eval_dataset.select(rows)
        return DataLoader(subset, batch_size=self.batch_size, collate_fn=self.collate)


AUDIT_FIGURES = {
    "auc": "auc",
    "auc_se": "auc_se",
    "pr_auc": "pr_auc",
    "auc_vs_non_members": "auc vs non-members",
    "auc_se_vs_non_members": "auc_se vs non-members",
    "tpr@1%fpr": "tpr@1%fpr",
    "tpr@0.1%fpr": "tpr@0.1%fpr",
    "tpr@1%fpr_at_most": "tpr@1%fpr at most",
    "tpr@0.1%fpr_at_most": "tpr@0.1%fpr at most",
    "beats_blind": "beats_blind",
    "beats_blind_vs_non_members": "beats_blind vs non-members",
}
"""The audit's figures logged per attack (figure: the report's key): ROC-AUC with its bootstrap
standard error and PR AUC against all negatives, the AUC and its error against the
never-planted records alone (the membership question proper: same distribution, not trained
on), the TPR at the field's low FPRs (all negatives) interpolated and at most the level (LiRA's
convention), and whether the attack beats the blind baseline (1 or 0) on each split. Each is
logged as :func:`audit_metric_name` of its attack and figure; the blind baseline's own AUCs as
``test/audit/blind/<figure>`` (:data:`BLIND_FIGURES`)."""

BLIND_FIGURES = {
    "auc": "auc",
    "auc_se": "auc_se",
    "auc_vs_non_members": "auc vs non-members",
    "auc_se_vs_non_members": "auc_se vs non-members",
}
"""The blind baseline's figures logged (figure: the key of the report's ``blind``)."""


def audit_metric_name(attack: str, figure: str) -> str:
    """The logged name of an attack's figure, by :func:`~lightning_info.core.logging.metric_key`:
    ``audit_metric_name("min_k++", "tpr@1%fpr")`` is ``"test/audit/min_kplusplus/tpr_at_1pct_fpr"``.
    """
    return metric_key("test/audit", attack, figure)


@torch.no_grad()
def _token_mean_nll(model: Any, loader: DataLoader | None, device: torch.device) -> float:
    """The token-weighted mean NLL of the label tokens over ``loader`` (as ``test/loss``)."""
    if loader is None:
        return float("nan")
    total, count = 0.0, 0
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        targets = int((batch["labels"][:, 1:] != -100).sum())
        total += float(model(**batch).loss) * targets
        count += targets
    return total / count if count else float("nan")


class SFTPipelineReport(Callback):
    """At the end of ``test``, logs every stage's figure as a ``test/...`` metric:

    - ``test/loss_clean``, ``test/loss_contaminated``: the token-mean NLL on the test items the
      pool scan found clean, and on those it found contaminated; ``test/contamination_gap`` =
      contaminated minus clean (below 0: the model scores better on what leaked);
    - ``test/leaked_fraction``: the share of test items with an n-gram in the training set;
      ``test/flagged_candidates`` and ``test/removed_candidates``: the pool scan's counts;
    - ``test/constrained_fraction``: the share of optimizer steps ``FisherConstraint`` rescaled
      (0 without the callback: no step was);
    - ``test/audit/<attack>/<figure>`` for each of ``attacks`` (all the audit's, :data:`ATTACKS`,
      by default) and :data:`AUDIT_FIGURES`, from the ``FragmentExtractionAudit`` callback's
      report, named by :func:`audit_metric_name` (``test/audit/target/tpr_at_1pct_fpr``,
      ``test/audit/min_kplusplus/auc_vs_non_members``), the blind baseline's
      :data:`BLIND_FIGURES` (``test/audit/blind/auc``), and ``test/audit/negatives``,
      ``test/audit/members_trained`` (member queries that are training examples).

    Every logged name matches :data:`~lightning_info.core.logging.METRIC_NAME`; ``values`` holds
    the last test's figures under those names.

    Needs an :class:`SFTPipelineDataModule`. Under DDP the audit's figures travel from global
    rank 0 (where the audit runs) with ``trainer.strategy.broadcast``; every rank evaluates the
    two test subsets whole, so every rank logs the same values.
    """

    def __init__(self, attacks: Sequence[str] = ATTACKS) -> None:
        attacks = require_string_sequence(attacks, "attacks")
        unknown = sorted(set(attacks) - set(ATTACKS))
        if unknown:
            raise ValueError(f"Unknown attacks {unknown}; choose from {list(ATTACKS)}.")
        self.attacks = tuple(attacks)
        self.values: dict[str, float] = {}

    def on_test_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        data = trainer.datamodule
        if not isinstance(data, SFTPipelineDataModule):
            raise TypeError("SFTPipelineReport needs an SFTPipelineDataModule.")
        model = getattr(pl_module, "model", pl_module)
        clean = _token_mean_nll(model, data.test_subset_loader(False), pl_module.device)
        dirty = _token_mean_nll(model, data.test_subset_loader(True), pl_module.device)
        values = {
            "test/loss_clean": clean,
            "test/loss_contaminated": dirty,
            "test/contamination_gap": dirty - clean,
            "test/flagged_candidates": float(data.scan.pool_flags.sum()),
            "test/removed_candidates": float(len(data.candidates) - data.num_kept_candidates),
            "test/leaked_fraction": data.leaked_fraction(),
            "test/constrained_fraction": 0.0,
        }
        for callback in trainer.callbacks:
            if isinstance(callback, FisherConstraint):
                values["test/constrained_fraction"] = callback.constrained_fraction
        audits = [c for c in trainer.callbacks if isinstance(c, FragmentExtractionAudit)]
        if audits:
            audit = None
            if trainer.is_global_zero:
                audit = self._audit_values(audits[0], data)
            values.update(trainer.strategy.broadcast(audit, src=0))
        self.values = values
        pl_module.log_dict(values)

    def _audit_values(self, audit: FragmentExtractionAudit, data: SFTPipelineDataModule) -> dict:
        if audit.report is None:
            raise RuntimeError("FragmentExtractionAudit has no report: it runs at the end of fit.")
        out = {
            audit_metric_name(attack, figure): float(audit.report.metrics[attack][key])
            for attack in self.attacks
            for figure, key in AUDIT_FIGURES.items()
            if key in audit.report.metrics[attack]  # no non-members in the set: no such AUC
        }
        out.update(
            {
                audit_metric_name("blind", figure): float(audit.report.blind[key])
                for figure, key in BLIND_FIGURES.items()
                if key in audit.report.blind  # the blind baseline is optional
            }
        )
        out["test/audit/negatives"] = float(audit.report.diagnostics["negatives"])
        queries = audit.attack_set
        trained = set(data.selected_texts())  # prompt, separator, response: a query's text
        out["test/audit/members_trained"] = float(
            sum(
                p + f in trained
                for p, f, label in zip(queries.prompts, queries.fragments, queries.labels)
                if label == 1
            )
        )
        return out
