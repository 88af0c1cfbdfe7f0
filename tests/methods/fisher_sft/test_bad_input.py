"""FisherSFT's entry points refuse what would give a silently wrong selection: indices, budgets
and seeds that are not integers, features that are not real floating point, repeated indices of a
set, and selection files made for another pool, seed or settings, edited, or truncated."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
import torch

from lightning_info.core.blocks import TokenBlocks
from lightning_info.lm.tiny_lm import tiny_causal_lm, train_bpe_tokenizer
from lightning_info.methods.fisher_sft.datamodule import (
    FisherSubsetDataModule,
    PromptResponseColumns,
    SubsetSelectionOptions,
)
from lightning_info.methods.fisher_sft.functional import (
    FeatureSketch,
    as_token_blocks,
    fisher_greedy_select,
    gaussian_sketch,
    k_center_select,
    log_det_objective,
    merge_shard_selections,
    random_select,
    sketch_features,
    two_round_greedy_select,
)
from lightning_info.methods.fisher_sft.sampler import (
    FisherSubsetSampler,
    load_selection,
    save_selection,
    select_subset,
    selection_fingerprint,
)
from tests import tiny_lm

FLOAT = "must be a real floating-point tensor, got dtype"


def _pool(n: int = 5, rows: int = 2, d: int = 3, dtype=torch.float64) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(rows, d, generator=generator).to(dtype) for _ in range(n)]


def _points(n: int = 6) -> torch.Tensor:
    return torch.randn(n, 2, generator=torch.Generator().manual_seed(0))


def _sampler_state(indices) -> None:
    FisherSubsetSampler([0, 1]).load_state_dict({"indices": indices, "seed": 0, "epoch": 0})


# -- selection files ---------------------------------------------------------------------------


def _saved(tmp_path, edit=None, **record_changes):
    """A selection of 2 of ``_pool()`` saved to ``tmp_path / "sel.json"``, its record edited."""
    pool = _pool()
    digest = selection_fingerprint(pool, strategy="fisher", budget=2)
    path = tmp_path / "sel.json"
    save_selection(select_subset(pool, 2), path, fingerprint=digest, pool_size=5, budget=2)
    record = json.loads(path.read_text())
    record.update(record_changes)
    text = json.dumps(record)
    path.write_text(edit(text) if edit else text)
    return path, digest


def _load(tmp_path, edit=None, **record_changes):
    path, digest = _saved(tmp_path, edit, **record_changes)
    return load_selection(path, fingerprint=digest, pool_size=5, budget=2)


def _older_format(tmp_path):
    path, digest = _saved(tmp_path)
    record = json.loads(path.read_text())
    del record["fingerprint"], record["format"]
    path.write_text(json.dumps(record))
    return load_selection(path, fingerprint=digest, pool_size=5, budget=2)


# -- the data module's selection file -----------------------------------------------------------


@functools.cache
def _feature_model():
    return tiny_lm.finetuner(lora=False).model


def _other_pool():
    pairs = tiny_lm._short_pairs()[2::5][: tiny_lm.POOL_SIZE]
    return tiny_lm.instruction_dataset(pairs, seed=0)


def _module(tmp_path, pool=None, **kwargs) -> FisherSubsetDataModule:
    options = SubsetSelectionOptions(path=str(tmp_path / "selection.json"))
    kwargs = {
        "selection_options": options,
        "feature_model": _feature_model(),
        "budget": 4,
        "max_length": 96,
        "progress": False,
        **kwargs,
    }
    return FisherSubsetDataModule(pool or tiny_lm.pool(), tiny_lm.tokenizer(), **kwargs)


def _reselect(tmp_path, first=None, then=None, edit=None):
    """Select with ``first`` (module kwargs) so that the file is saved, edit it, then set up a
    module built with ``then``: it must refuse the file."""
    _module(tmp_path, **(first or {})).setup("fit")
    path = tmp_path / "selection.json"
    if edit is not None:
        path.write_text(edit(path.read_text()))
    _module(tmp_path, **(then or {})).setup("fit")


def _drop_index(text: str) -> str:
    record = json.loads(text)
    record["indices"] = record["indices"][:1]
    return json.dumps(record)


def _without_fingerprint(text: str) -> str:
    record = json.loads(text)
    del record["fingerprint"]
    return json.dumps(record)


def _resume(tmp_path, indices, **kwargs):
    module = _module(tmp_path, **kwargs)
    module.load_state_dict({"sampler": {"indices": indices, "seed": 0, "epoch": 0}})


@functools.cache
def _small_model():
    """A GPT-2 whose embedding has 260 rows: fewer than ``tiny_lm.tokenizer()``'s tokens."""
    tokenizer = train_bpe_tokenizer(["hello world"], vocab_size=260)
    return tiny_causal_lm(tokenizer, n_layer=1, n_embd=8, n_head=2)


FILE_ROWS = [
    pytest.param(
        lambda tmp: _reselect(tmp, then={"pool": _other_pool()}),
        ValueError,
        r"selection\.json holds a FisherSFT selection made from other inputs",
        id="selection-file-from-another-pool-of-the-same-size",
    ),
    pytest.param(
        lambda tmp: _reselect(tmp, {"strategy": "random"}, {"strategy": "random", "seed": 1}),
        ValueError,
        r"made from other inputs or options",
        id="random-selection-file-for-another-seed",
    ),
    pytest.param(
        lambda tmp: _reselect(tmp, edit=_drop_index),
        ValueError,
        r"selection\.json holds 1 indices but the selection is for budget=4",
        id="selection-file-edited-down-to-one-index",
    ),
    pytest.param(
        lambda tmp: _reselect(tmp, edit=lambda text: text[: len(text) // 2]),
        ValueError,
        r"selection\.json, line \d+, column \d+: not valid JSON",
        id="selection-file-truncated",
    ),
    pytest.param(
        lambda tmp: _reselect(tmp, edit=_without_fingerprint),
        ValueError,
        r"selection\.json holds a FisherSFT selection without a fingerprint .* delete it",
        id="selection-file-of-the-older-format",
    ),
    pytest.param(
        lambda tmp: _resume(tmp, list(range(8))),
        ValueError,
        r"The checkpoint serves 8 pool rows but this data module serves 4 \(budget=4\)",
        id="resume-state-of-another-budget",
    ),
    pytest.param(
        lambda tmp: _resume(tmp, [0, 1, 2, 30]),
        ValueError,
        r"`the checkpoint's selected indices` must hold indices in \[0, 24\), got 30",
        id="resume-state-of-a-larger-pool",
    ),
    pytest.param(
        lambda tmp: _resume(tmp, [0, 1, 1, 2]),
        ValueError,
        r"repeats the index\(es\) \[1\]",
        id="resume-state-with-a-repeat",
    ),
]


def _lam_changed(tmp):
    path = str(tmp / "selection.json")
    _reselect(tmp, then={"selection_options": SubsetSelectionOptions(path=path, lam=5.0)})


BAD_INPUT = [
    # -- the functional core: a set is a set ---------------------------------------------------
    pytest.param(
        lambda: log_det_objective(_pool(), [0, 0]),
        ValueError,
        r"`indices` repeats the example\(s\) \[0\]; F\(S\) is a function of a set",
        id="log-det-repeated-index",
    ),
    pytest.param(
        lambda: log_det_objective(_pool(), [True]),
        TypeError,
        r"`indices` must hold integer example indices, got True at position 0",
        id="log-det-bool-index",
    ),
    pytest.param(
        lambda: log_det_objective(_pool(), torch.tensor([True, False, True, False, False])),
        TypeError,
        r"got dtype torch.bool; pass integers \(a bool mask becomes indices with",
        id="log-det-bool-mask",
    ),
    pytest.param(
        lambda: log_det_objective(_pool(), torch.tensor([0.0, 1.0])),
        TypeError,
        r"`indices` must hold integer example indices, got dtype torch.float32",
        id="log-det-float-tensor-indices",
    ),
    pytest.param(
        lambda: log_det_objective(_pool(), np.array([0.0, 2.0])),
        TypeError,
        r"got dtype float64",
        id="log-det-float-array-indices",
    ),
    pytest.param(
        lambda: log_det_objective(_pool(), "01"),
        TypeError,
        r"`indices` must be a sequence of integer example indices, got a string '01'",
        id="log-det-indices-string",
    ),
    pytest.param(
        lambda: log_det_objective(_pool(dtype=torch.int64), [0]),
        TypeError,
        rf"`features\[0\]` {FLOAT} torch.int64",
        id="log-det-integer-features",
    ),
    pytest.param(
        lambda: log_det_objective(_pool(dtype=torch.complex128), [0]),
        TypeError,
        rf"`features\[0\]` {FLOAT} torch.complex128",
        id="log-det-complex-features",
    ),
    pytest.param(
        lambda: fisher_greedy_select(_pool(dtype=torch.int32), 2),
        TypeError,
        rf"`features\[0\]` {FLOAT} torch.int32",
        id="greedy-integer-features",
    ),
    pytest.param(
        lambda: fisher_greedy_select(_pool(dtype=torch.complex64), 2),
        TypeError,
        rf"`features\[0\]` {FLOAT} torch.complex64",
        id="greedy-complex-features",
    ),
    pytest.param(
        lambda: fisher_greedy_select(_pool(dtype=torch.bool), 2),
        TypeError,
        rf"`features\[0\]` {FLOAT} torch.bool",
        id="greedy-bool-features",
    ),
    pytest.param(
        lambda: fisher_greedy_select(TokenBlocks.from_list(_pool(dtype=torch.int64)), 2),
        TypeError,
        rf"`features.values` {FLOAT} torch.int64",
        id="greedy-integer-token-blocks",
    ),
    pytest.param(
        lambda: fisher_greedy_select(_pool(), 2, dtype=torch.int64),
        TypeError,
        r"`dtype` must be a real floating-point torch dtype, got torch.int64",
        id="greedy-integer-dtype",
    ),
    pytest.param(
        lambda: fisher_greedy_select(_pool(), 2, token_weights=torch.ones(10, dtype=torch.bool)),
        TypeError,
        r"`token_weights` must hold real numbers, got dtype torch.bool",
        id="greedy-bool-token-weights",
    ),
    pytest.param(
        lambda: fisher_greedy_select(_pool(), 2, token_weights=torch.ones(10, dtype=torch.cfloat)),
        TypeError,
        r"`token_weights` must hold real numbers, got dtype torch.complex64",
        id="greedy-complex-token-weights",
    ),
    pytest.param(
        lambda: fisher_greedy_select(_pool(), 2, token_weights=[True] * 10),
        TypeError,
        r"`token_weights` must hold numbers, got a bool",
        id="greedy-token-weights-list-of-bools",
    ),
    pytest.param(
        lambda: k_center_select(torch.tensor([[0, 0], [1, 1], [3, 3]]), 2),
        TypeError,
        rf"`points` {FLOAT} torch.int64",
        id="k-center-integer-points",
    ),
    pytest.param(
        lambda: k_center_select(_points().to(torch.complex64), 2),
        TypeError,
        rf"`points` {FLOAT} torch.complex64",
        id="k-center-complex-points",
    ),
    pytest.param(
        lambda: k_center_select(_points(), 2, seed=1.5),
        TypeError,
        r"`seed` must be an int, got 1.5",
        id="k-center-float-seed",
    ),
    pytest.param(
        lambda: k_center_select(_points(), 2, seed=True),
        TypeError,
        r"`seed` must be an int, got True",
        id="k-center-bool-seed",
    ),
    pytest.param(
        lambda: k_center_select(_points(), 2, seed="1"),
        TypeError,
        r"`seed` must be an int, got '1'",
        id="k-center-string-seed",
    ),
    pytest.param(
        lambda: random_select(5, 2, seed=2.5),
        TypeError,
        r"`seed` must be an int, got 2.5",
        id="random-float-seed",
    ),
    pytest.param(
        lambda: random_select(5, 2, seed=-1),
        ValueError,
        r"`seed` must be >= 0, got -1",
        id="random-negative-seed",
    ),
    pytest.param(
        lambda: select_subset(_pool(), 2, strategy="random", pool_size=9),
        ValueError,
        r"`pool_size` = 9 but `features` holds 5 examples",
        id="random-pool-size-disagrees-with-features",
    ),
    pytest.param(
        lambda: select_subset(_pool(dtype=torch.int64), 2, strategy="k_center"),
        TypeError,
        rf"`features\[0\]` {FLOAT} torch.int64",
        id="k-center-strategy-integer-features",
    ),
    pytest.param(
        lambda: sketch_features(_pool(dtype=torch.int64), FeatureSketch(2)),
        TypeError,
        rf"`features\[0\]` {FLOAT} torch.int64",
        id="sketch-integer-features",
    ),
    pytest.param(
        lambda: FeatureSketch(2)(torch.ones(3, 4, dtype=torch.int64)),
        TypeError,
        rf"`rows` {FLOAT} torch.int64",
        id="sketch-call-on-integer-rows",
    ),
    pytest.param(
        lambda: gaussian_sketch(4, 2, dtype=torch.int32),
        TypeError,
        r"`dtype` must be a real floating-point torch dtype, got torch.int32",
        id="gaussian-sketch-integer-dtype",
    ),
    # -- the sampler --------------------------------------------------------------------------
    pytest.param(
        lambda: FisherSubsetSampler([0.7, 1.2]),
        TypeError,
        r"`indices\[0\]` must be an integer index, got float 0.7",
        id="sampler-float-indices",
    ),
    pytest.param(
        lambda: FisherSubsetSampler([True, False]),
        TypeError,
        r"`indices\[0\]` must be an integer index, got bool True",
        id="sampler-bool-indices",
    ),
    pytest.param(
        lambda: FisherSubsetSampler("12"),
        TypeError,
        r"`indices` must be a sequence of integer indices, got a string '12'",
        id="sampler-string-indices",
    ),
    pytest.param(
        lambda: FisherSubsetSampler(torch.tensor([0.5, 1.5])),
        TypeError,
        r"`indices` must hold integer indices, got dtype torch.float32",
        id="sampler-float-tensor-indices",
    ),
    pytest.param(
        lambda: FisherSubsetSampler([0, 1], shuffle="no"),
        TypeError,
        r"`shuffle` must be True or False, got 'no'",
        id="sampler-string-shuffle",
    ),
    pytest.param(
        lambda: FisherSubsetSampler([0, 1]).set_epoch(1.5),
        TypeError,
        r"`epoch` must be an integer index, got float 1.5",
        id="sampler-float-epoch",
    ),
    pytest.param(
        lambda: _sampler_state([1.5, 2]),
        TypeError,
        r"`state_dict\['indices'\]\[0\]` must be an integer index, got float 1.5",
        id="sampler-state-float-indices",
    ),
    pytest.param(
        lambda: _sampler_state([1, 1]),
        ValueError,
        r"`state_dict\['indices'\]` repeats the index\(es\) \[1\]",
        id="sampler-state-repeated-indices",
    ),
    # -- selection files ----------------------------------------------------------------------
    pytest.param(
        lambda tmp: _load(tmp, edit=lambda text: text[: len(text) // 2]),
        ValueError,
        r"sel\.json, line \d+, column \d+: not valid JSON",
        id="load-selection-truncated-json",
    ),
    pytest.param(
        _older_format,
        ValueError,
        r"sel\.json holds a FisherSFT selection without a fingerprint .* delete it",
        id="load-selection-older-format",
    ),
    pytest.param(
        lambda tmp: load_selection(
            _saved(tmp)[0],
            fingerprint=selection_fingerprint(_pool(n=5, d=4), strategy="fisher", budget=2),
        ),
        ValueError,
        r"sel\.json holds a FisherSFT selection made from other inputs or options",
        id="load-selection-for-another-pool",
    ),
    pytest.param(
        lambda tmp: _load(tmp, indices=[0]),
        ValueError,
        r"sel\.json holds 1 indices but the selection is for budget=2",
        id="load-selection-edited-to-one-index",
    ),
    pytest.param(
        lambda tmp: _load(tmp, indices=[0, 7]),
        ValueError,
        r"`indices in .*sel\.json` must hold indices in \[0, 5\), got 7",
        id="load-selection-index-out-of-range",
    ),
    pytest.param(
        lambda tmp: _load(tmp, indices=[1, 1]),
        ValueError,
        r"`indices in .*sel\.json` repeats the index\(es\) \[1\]",
        id="load-selection-repeated-index",
    ),
    pytest.param(
        lambda tmp: _load(tmp, indices=[1.5, 2]),
        TypeError,
        r"`indices in .*sel\.json\[0\]` must be an integer index, got float 1.5",
        id="load-selection-float-index",
    ),
    pytest.param(
        lambda tmp: _load(tmp, edit=lambda text: "[1, 2]"),
        ValueError,
        r"sel\.json is not a FisherSFT selection \(a JSON object with `indices`\)",
        id="load-selection-json-list",
    ),
    pytest.param(
        lambda tmp: _load(tmp, lam="one"),
        ValueError,
        r"sel\.json: `objective`, `lam` and `gains` must be numbers",
        id="load-selection-string-lam",
    ),
    pytest.param(
        lambda tmp: save_selection(
            select_subset(_pool(), 2), _saved(tmp)[0] / "inner.json", fingerprint="abc"
        ),
        NotADirectoryError,
        r"sel\.json is a file; pick a path in a folder",
        id="save-selection-under-a-file",
    ),
    pytest.param(
        lambda tmp: save_selection(select_subset(_pool(), 2), tmp / "s.json", fingerprint=None),
        TypeError,
        r"`fingerprint` must be the digest of the pool and settings",
        id="save-selection-without-fingerprint",
    ),
    # -- the data module ----------------------------------------------------------------------
    *FILE_ROWS,
    pytest.param(
        _lam_changed,
        ValueError,
        r"made from other inputs or options",
        id="selection-file-for-another-lam",
    ),
    pytest.param(
        lambda: SubsetSelectionOptions(two_round="no"),
        TypeError,
        r"`two_round` must be True or False, got 'no'",
        id="options-string-two-round",
    ),
    pytest.param(
        lambda: SubsetSelectionOptions(path=3),
        TypeError,
        r"`path` must be a path \(str\) or None, got 3",
        id="options-integer-path",
    ),
    pytest.param(
        lambda: PromptResponseColumns(chat_template="no"),
        TypeError,
        r"`chat_template` must be True or False, got 'no'",
        id="columns-string-chat-template",
    ),
    pytest.param(
        lambda: PromptResponseColumns(prompt_column=3),
        TypeError,
        r"`prompt_column` must be a column name \(str\), got 3",
        id="columns-integer-name",
    ),
    pytest.param(
        lambda tmp: _module(tmp, progress="no"),
        TypeError,
        r"`progress` must be True or False, got 'no'",
        id="data-module-string-progress",
    ),
    pytest.param(
        lambda: FisherSubsetDataModule([{"prompt": "a", "response": "b"}], tiny_lm.tokenizer(), 1),
        TypeError,
        r"`pool` must be a datasets.Dataset, got list; build one with",
        id="data-module-pool-list",
    ),
    pytest.param(
        lambda: FisherSubsetDataModule({"prompt": ["a"]}, tiny_lm.tokenizer(), 1),
        TypeError,
        r"`pool` must be a datasets.Dataset, got dict",
        id="data-module-pool-dict",
    ),
    pytest.param(
        lambda tmp: _module(tmp, feature_model="gpt2"),
        TypeError,
        r"`feature_model` must be a torch.nn.Module \(a causal LM\) or None, got str",
        id="data-module-feature-model-name",
    ),
    pytest.param(
        lambda tmp: _module(tmp, strategy="random", feature_model=_small_model()).setup("fit"),
        ValueError,
        r"tokenizer does not belong to this model: a vocabulary/embedding mismatch, its "
        r"vocabulary has 400 tokens but the model's input embedding has only 260 rows",
        id="data-module-tokenizer-of-another-model",
    ),
]


from lightning_info.methods.fisher_sft.dask_select import (  # noqa: E402
    dask_two_round_select,
    store_two_round_select,
)
from lightning_info.methods.fisher_sft.feature_store import FeatureStore  # noqa: E402
from lightning_info.methods.fisher_sft.functional import Selection  # noqa: E402


def _store(folder, *, weighted: bool = False) -> FeatureStore:
    """A store of six examples of two rows of width 3 in ``folder / "store"``."""
    generator = torch.Generator().manual_seed(0)
    store = FeatureStore.create(folder / "store", weighted=weighted)
    features = [torch.randn(2, 3, generator=generator) for _ in range(6)]
    store.append(features, torch.rand(12, generator=generator) if weighted else None)
    return store


def _edited_record(folder, **changes) -> FeatureStore:
    store = _store(folder)
    record_path = store.path / "store.json"
    record = {**json.loads(record_path.read_text()), **changes}
    record_path.write_text(json.dumps(record))
    return FeatureStore.open(store.path)


def _record_without(folder, key: str) -> FeatureStore:
    store = _store(folder)
    record_path = store.path / "store.json"
    record = json.loads(record_path.read_text())
    del record[key]
    record_path.write_text(json.dumps(record))
    return FeatureStore.open(store.path)


BAD_INPUT += [
    pytest.param(
        lambda folder: FeatureStore.create(folder / "s", weighted="no"),
        TypeError,
        r"`weighted` must be True or False, got 'no'",
        id="feature-store-weighted-string",
    ),
    pytest.param(
        lambda folder: FeatureStore.create(_store(folder).path, overwrite="no"),
        TypeError,
        r"`overwrite` must be True or False, got 'no'",
        id="feature-store-overwrite-string",
    ),
    pytest.param(
        lambda: FeatureStore.create(5),
        TypeError,
        r"`path` must be the folder of a feature store .*got 5",
        id="feature-store-path-int",
    ),
    pytest.param(
        lambda folder: FeatureStore.create(folder / "s", dim=True),
        TypeError,
        r"`dim` must be an int, got True",
        id="feature-store-dim-bool",
    ),
    pytest.param(
        lambda folder: FeatureStore.open(_store(folder).path, dim=True),
        TypeError,
        r"`dim` must be an int, got True",
        id="feature-store-open-dim-bool",
    ),
    pytest.param(
        lambda folder: FeatureStore.open(_store(folder).path, mode="w"),
        ValueError,
        r"`mode` must be one of \('r', 'a'\), got 'w'",
        id="feature-store-open-mode",
    ),
    pytest.param(
        lambda folder: _edited_record(folder, count="6"),
        ValueError,
        r"store.json holds a count, width or sketch of the wrong type",
        id="feature-store-record-count-string",
    ),
    pytest.param(
        lambda folder: _edited_record(folder, dim=3.0),
        ValueError,
        r"store.json holds a count, width or sketch of the wrong type",
        id="feature-store-record-dim-float",
    ),
    pytest.param(
        lambda folder: _record_without(folder, "sketch"),
        ValueError,
        r"store.json lacks \['sketch'\]",
        id="feature-store-record-without-sketch",
    ),
    pytest.param(
        lambda folder: _store(folder).append([torch.full((1, 3), float("nan"))]),
        ValueError,
        r"`features` hold NaN or inf",
        id="feature-store-append-nan",
    ),
    pytest.param(
        lambda folder: _store(folder, weighted=True).append(
            [torch.ones(1, 3)], torch.tensor([float("inf")])
        ),
        ValueError,
        r"`token_weights` holds NaN or inf",
        id="feature-store-append-inf-weight",
    ),
    pytest.param(
        lambda folder: _store(folder).append([torch.ones(1, 3, dtype=torch.int64)]),
        TypeError,
        FLOAT,
        id="feature-store-append-int",
    ),
    pytest.param(
        lambda folder: _store(folder).blocks(True),
        TypeError,
        r"`start` must be an integer index, got bool True",
        id="feature-store-blocks-bool-start",
    ),
    pytest.param(
        lambda folder: _store(folder).read(0, 2.5),
        TypeError,
        r"`stop` must be an integer index, got float 2.5",
        id="feature-store-read-float-stop",
    ),
    pytest.param(
        lambda folder: _store(folder, weighted=True).token_weights(True),
        TypeError,
        r"`start` must be an integer index, got bool True",
        id="feature-store-token-weights-bool-start",
    ),
    pytest.param(
        lambda folder: _store(folder).take([True, False]),
        TypeError,
        r"`indices\[0\]` must be an integer index, got bool True",
        id="feature-store-take-bools",
    ),
    pytest.param(
        lambda folder: _store(folder).take([0.7]),
        TypeError,
        r"`indices\[0\]` must be an integer index, got float 0.7",
        id="feature-store-take-float",
    ),
    pytest.param(
        lambda folder: _store(folder).take("01"),
        TypeError,
        r"`indices` must be a sequence of integer indices, got a string '01'",
        id="feature-store-take-string",
    ),
    pytest.param(
        lambda folder: _store(folder).take([-1]),
        ValueError,
        r"`indices` must hold indices >= 0, got -1",
        id="feature-store-take-negative",
    ),
    pytest.param(
        lambda folder: _store(folder).shard(True, 2),
        TypeError,
        r"`rank` must be an integer index, got bool True",
        id="feature-store-shard-bool-rank",
    ),
    pytest.param(
        lambda folder: _store(folder).shard(0.5, 2),
        TypeError,
        r"`rank` must be an integer index, got float 0.5",
        id="feature-store-shard-float-rank",
    ),
    pytest.param(
        lambda folder: store_two_round_select(_store(folder), True, 2),
        TypeError,
        r"`budget` must be an int, got True",
        id="store-two-round-bool-budget",
    ),
    pytest.param(
        lambda folder: store_two_round_select(_store(folder), 7, 2),
        ValueError,
        r"budget=7 is larger than the store's pool \(6 examples",
        id="store-two-round-budget-beyond-pool",
    ),
    pytest.param(
        lambda folder: store_two_round_select(_store(folder), 2, 2, lam=float("nan")),
        ValueError,
        r"`lam` must be finite, got nan",
        id="store-two-round-nan-lam",
    ),
    pytest.param(
        lambda: store_two_round_select(5, 2, 2),
        TypeError,
        r"`path` must be the folder of a feature store .*got 5",
        id="store-two-round-path-int",
    ),
    pytest.param(
        lambda folder: store_two_round_select(folder / "missing", 2, 2),
        FileNotFoundError,
        r"holds no feature store \(no store.json\)",
        id="store-two-round-missing-store",
    ),
    pytest.param(
        lambda folder: dask_two_round_select(_store(folder).path, 2, 2, client="local"),
        TypeError,
        r"`client` must be a distributed.Client or None, got str; .*scheduler='threads'",
        id="dask-two-round-client-string",
    ),
    pytest.param(
        lambda folder: dask_two_round_select(_store(folder).path, 2, 2.0),
        TypeError,
        r"`num_shards` must be an int, got 2.0",
        id="dask-two-round-float-shards",
    ),
    pytest.param(
        lambda folder: dask_two_round_select(_store(folder).path, 2, 2, method="x"),
        ValueError,
        r"`method` must be one of \('lazy', 'naive'\), got 'x'",
        id="dask-two-round-method",
    ),
    pytest.param(
        lambda folder: save_selection(
            Selection([0.5], [1.0], 1.0, 1.0, 3), folder / "s.json", fingerprint="x"
        ),
        TypeError,
        r"`indices` must hold integer example indices, got 0.5 at position 0",
        id="save-selection-float-index",
    ),
    pytest.param(
        lambda folder: save_selection(
            Selection([0, 0], [1.0, 0.0], 1.0, 1.0, 3), folder / "s.json", fingerprint="x"
        ),
        ValueError,
        r"`indices` repeats the example\(s\) \[0\]",
        id="save-selection-repeated-index",
    ),
    pytest.param(
        lambda folder: save_selection({"indices": [0]}, folder / "s.json", fingerprint="x"),
        TypeError,
        r"`selection` must be a Selection .*got dict",
        id="save-selection-dict",
    ),
]

_FOUR_BLOCKS = [torch.eye(3)[:2] * (k + 1) for k in range(4)]

BAD_INPUT += [
    pytest.param(
        lambda: as_token_blocks(torch.ones(4, 3)),
        TypeError,
        r"got a tensor of shape \(4, 3\); for one row per example pass `list\(x.unsqueeze\(1\)\)`",
        id="as-token-blocks-one-tensor",
    ),
    pytest.param(
        lambda: as_token_blocks("features"),
        TypeError,
        r"`features` must be a TokenBlocks or a list of \(m_i, d\) tensors.*got str",
        id="as-token-blocks-text",
    ),
    pytest.param(
        lambda: as_token_blocks([torch.ones(2, 3, dtype=torch.long)]),
        TypeError,
        r"`features\[0\]` must be a real floating-point tensor, got dtype torch.int64",
        id="as-token-blocks-integer-block",
    ),
    pytest.param(
        lambda: as_token_blocks([torch.ones(2, 3), torch.ones(2, 4)]),
        ValueError,
        r"`features\[1\]` has d = 4 but `features\[0\]` has d = 3",
        id="as-token-blocks-mixed-widths",
    ),
    pytest.param(
        lambda: as_token_blocks([]),
        ValueError,
        r"Need at least one example block",
        id="as-token-blocks-empty",
    ),
    pytest.param(
        lambda: two_round_greedy_select(_FOUR_BLOCKS, 2, 2.0),
        TypeError,
        r"`num_shards` must be an int, got 2.0",
        id="two-round-float-shards",
    ),
    pytest.param(
        lambda: two_round_greedy_select(_FOUR_BLOCKS, 2, True),
        TypeError,
        r"`num_shards` must be an int, got True",
        id="two-round-bool-shards",
    ),
    pytest.param(
        lambda: two_round_greedy_select(_FOUR_BLOCKS, 2, 0),
        ValueError,
        r"`num_shards` must be >= 1, got 0",
        id="two-round-zero-shards",
    ),
    pytest.param(
        lambda: two_round_greedy_select(_FOUR_BLOCKS, 9, 2),
        ValueError,
        r"budget=9 is larger than the candidate pool \(4 examples\)",
        id="two-round-budget-above-pool",
    ),
    pytest.param(
        lambda: merge_shard_selections(as_token_blocks(_FOUR_BLOCKS), [[0, 0]], 2),
        ValueError,
        r"`groups\[0\]` repeats the index\(es\) \[0\]; it stands for a set",
        id="merge-shards-repeated-position",
    ),
    pytest.param(
        lambda: merge_shard_selections(as_token_blocks(_FOUR_BLOCKS), [[0, 7]], 2),
        ValueError,
        r"`groups\[0\]` must hold indices in \[0, 4\), got 7",
        id="merge-shards-position-out-of-range",
    ),
    pytest.param(
        lambda: merge_shard_selections(as_token_blocks(_FOUR_BLOCKS), [[0.0, 1.0]], 2),
        TypeError,
        r"`groups\[0\]\[0\]` must be an integer index, got float 0.0",
        id="merge-shards-float-positions",
    ),
    pytest.param(
        lambda: merge_shard_selections(as_token_blocks(_FOUR_BLOCKS), "01", 2),
        TypeError,
        r"`groups` must be a list of lists of positions in `candidates`, got str",
        id="merge-shards-groups-text",
    ),
]

from lightning_info.methods.fisher_sft.reselection_callback import FisherReselection  # noqa: E402


def _served_module(tmp_path, budget=4):
    module = _module(tmp_path, budget=budget)
    module.setup("fit")
    return module


BAD_INPUT += [
    pytest.param(
        lambda: FisherReselection(every_n_epochs=None),
        ValueError,
        r"pass `every_n_epochs` \(a schedule\) or `monitor` \(on a plateau\), exactly one",
        id="reselection-no-schedule",
    ),
    pytest.param(
        lambda: FisherReselection(every_n_epochs=2, monitor="val/loss"),
        ValueError,
        r"exactly one",
        id="reselection-two-schedules",
    ),
    pytest.param(
        lambda: FisherReselection(every_n_epochs=0),
        ValueError,
        r"`every_n_epochs` must be >= 1, got 0",
        id="reselection-zero-epochs",
    ),
    pytest.param(
        lambda: FisherReselection(every_n_epochs=1.5),
        TypeError,
        r"`every_n_epochs` must be an int",
        id="reselection-float-epochs",
    ),
    pytest.param(
        lambda: FisherReselection(every_n_epochs=None, monitor=3),
        TypeError,
        r"`monitor` must be a metric name \(str\), got 3",
        id="reselection-monitor-not-a-name",
    ),
    pytest.param(
        lambda: FisherReselection(mode="lower"),
        ValueError,
        r"`mode` must be one of",
        id="reselection-mode",
    ),
    pytest.param(
        lambda: FisherReselection(patience=0),
        ValueError,
        r"`patience` must be >= 1, got 0",
        id="reselection-zero-patience",
    ),
    pytest.param(
        lambda: FisherReselection(min_delta=float("nan")),
        ValueError,
        r"`min_delta` must be a number >= 0, got nan",
        id="reselection-nan-delta",
    ),
    pytest.param(
        lambda: FisherReselection(exclude_served="yes"),
        TypeError,
        r"`exclude_served` must be True or False, got .yes.",
        id="reselection-exclude-str",
    ),
    pytest.param(
        lambda: FisherReselection().load_state_dict(
            {"best": "low", "waited": 0, "pending": None, "schedule": [1, None, "min", False]}
        ),
        TypeError,
        r"`best` must be a number, got 'low'",
        id="reselection-load-str-best",
    ),
    pytest.param(
        lambda tmp: _served_module(tmp).reselect(1.0),
        TypeError,
        r"`epoch` must be an int",
        id="datamodule-reselect-float-epoch",
    ),
    pytest.param(
        lambda tmp: _served_module(tmp, budget=16).reselect(1, exclude_served=True),
        ValueError,
        r"8 examples of the pool were never served, fewer than budget=16",
        id="datamodule-reselect-pool-exhausted",
    ),
]
