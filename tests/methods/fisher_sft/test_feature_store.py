"""FeatureStore: appended pools read back exactly, memory-mapped without a copy; shards, takes
and clear errors on corrupt or mismatched stores."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from lightning.pytorch import Callback

from lightning_info.core.blocks import TokenBlocks
from lightning_info.methods.fisher_sft.feature_store import FeatureStore, shard_range
from lightning_info.methods.fisher_sft.functional import FeatureSketch, fisher_greedy_select


def _pool(count=50, dim=8, seed=0):
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 7, (count,), generator=generator)
    blocks = [torch.randn(int(n), dim, generator=generator) for n in lengths]
    weights = [torch.rand(int(n), generator=generator) for n in lengths]
    return blocks, weights


def _filled(path, blocks, weights=None, batch=16, **kwargs):
    store = FeatureStore.create(path, weighted=weights is not None, **kwargs)
    for start in range(0, len(blocks), batch):
        part = weights and torch.cat(weights[start : start + batch])
        store.append(blocks[start : start + batch], part)
    return store


def test_appended_batches_read_back_exactly_as_one_pool(tmp_path):
    blocks, weights = _pool()
    _filled(tmp_path / "store", blocks, weights)
    store = FeatureStore.open(tmp_path / "store")
    assert (len(store), store.rows, store.dim) == (50, sum(len(b) for b in blocks), 8)
    pool = store.blocks()
    assert isinstance(pool, TokenBlocks) and pool.values.dtype == torch.float32
    assert all(torch.equal(a, b) for a, b in zip(pool.to_list(), blocks, strict=True))
    assert torch.equal(store.token_weights(), torch.cat(weights))
    record = json.loads((tmp_path / "store" / "store.json").read_text())
    assert record["count"] == 50 and record["weighted"] and record["sketch"] is None


def test_the_view_is_the_memory_map_itself_not_a_copy(tmp_path):
    blocks, _ = _pool()
    _filled(tmp_path / "store", blocks)
    store = FeatureStore.open(tmp_path / "store")
    first = store.blocks()
    second = store.blocks(10, 20)
    # both views share the pages of one copy-on-write map of values.f32
    mapped = store._maps["values.f32"][1]
    assert first.values.data_ptr() == mapped.ctypes.data
    offset = int(first.offsets[10]) * store.dim * 4
    assert second.values.data_ptr() == mapped.ctypes.data + offset
    # writing to the tensor changes this process's pages only, never the file
    first.values[0, 0] = 1234.0
    assert FeatureStore.open(tmp_path / "store").blocks().values[0, 0] == blocks[0][0, 0]


def test_shards_reads_and_takes_hold_exactly_their_examples(tmp_path):
    blocks, weights = _pool()
    store = _filled(tmp_path / "store", blocks, weights)
    ranges = [shard_range(len(store), r, 4) for r in range(4)]
    assert ranges == [(0, 12), (12, 25), (25, 37), (37, 50)]
    for rank, (start, stop) in enumerate(ranges):
        view, view_weights = store.shard(rank, 4)
        read, read_weights = store.read(start, stop)
        for part in (view, read):
            assert all(torch.equal(a, b) for a, b in zip(part.to_list(), blocks[start:stop]))
        expected = torch.cat(weights[start:stop])
        assert torch.equal(view_weights, expected) and torch.equal(read_weights, expected)
    taken, taken_weights = store.take([7, 3, 49, 3])
    assert all(torch.equal(a, blocks[i]) for a, i in zip(taken.to_list(), [7, 3, 49, 3]))
    assert torch.equal(taken_weights, torch.cat([weights[i] for i in [7, 3, 49, 3]]))


def test_selection_on_the_view_equals_selection_in_memory(tmp_path):
    blocks, weights = _pool(count=80)
    store = _filled(tmp_path / "store", blocks, weights)
    memory = fisher_greedy_select(blocks, 10, token_weights=weights)
    disk = fisher_greedy_select(store.blocks(), 10, token_weights=store.token_weights())
    assert disk.indices == memory.indices and disk.objective == pytest.approx(memory.objective)


def test_a_store_reopened_for_appending_keeps_growing_and_stays_readable(tmp_path):
    blocks, _ = _pool()
    _filled(tmp_path / "store", blocks[:20])
    store = FeatureStore.open(tmp_path / "store", mode="a")
    assert len(store.blocks()) == 20
    store.append(blocks[20:])
    assert len(store) == 50 and len(store.blocks()) == 50  # the map follows the new rows
    assert torch.equal(FeatureStore.open(tmp_path / "store").blocks().block(49), blocks[49])


def test_the_sketch_is_recorded_and_checked_on_reopening(tmp_path):
    sketch = FeatureSketch(4, seed=3)
    store = FeatureStore.create(tmp_path / "store", sketch=sketch)
    assert store.dim == 4 and store.sketch == sketch
    store.append([sketch(torch.randn(3, 16))])
    FeatureStore.open(tmp_path / "store", sketch=FeatureSketch(4, seed=3))
    with pytest.raises(ValueError, match="made with sketch"):
        FeatureStore.open(tmp_path / "store", sketch=FeatureSketch(4, seed=4))
    with pytest.raises(ValueError, match="made with sketch"):
        FeatureStore.open(tmp_path / "store", sketch=None)
    with pytest.raises(ValueError, match="rows of a store sketched"):
        FeatureStore.create(tmp_path / "other", dim=16, sketch=sketch)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda s: s.append([torch.randn(2, 5)]), ValueError, "width 5 but the store"),
        (lambda s: s.append([torch.randn(2, 8)], torch.ones(2)), ValueError, "without token"),
        (lambda s: s.blocks(0, 99), IndexError, "outside the store"),
        (lambda s: s.take([]), ValueError, "empty"),
        (lambda s: s.take([0, 50]), IndexError, r"\[0, 50\)"),
    ],
)
def test_mismatched_appends_and_reads_are_refused(tmp_path, call, error, message):
    blocks, _ = _pool()
    store = _filled(tmp_path / "store", blocks)
    with pytest.raises(error, match=message):
        call(store)
    assert len(FeatureStore.open(tmp_path / "store")) == 50  # a refused append wrote nothing


def test_weighted_stores_need_one_weight_per_row_and_read_stores_refuse_appends(tmp_path):
    store = FeatureStore.create(tmp_path / "store", weighted=True)
    with pytest.raises(ValueError, match="keeps token weights"):
        store.append([torch.randn(2, 8)])
    with pytest.raises(ValueError, match="one entry per token row"):
        store.append([torch.randn(2, 8)], torch.ones(3))
    store.append([torch.randn(2, 8)], torch.ones(2))
    with pytest.raises(PermissionError, match="mode='a'"):
        FeatureStore.open(tmp_path / "store").append([torch.randn(2, 8)], torch.ones(2))
    with pytest.raises(ValueError, match="empty"):
        FeatureStore.create(tmp_path / "empty").blocks()


def test_truncated_and_overlong_files_are_named(tmp_path):
    blocks, _ = _pool()
    _filled(tmp_path / "store", blocks)
    values = tmp_path / "store" / "values.f32"
    data = values.read_bytes()
    values.write_bytes(data[:-4])
    with pytest.raises(ValueError, match="values.f32 is truncated"):
        FeatureStore.open(tmp_path / "store")
    # bytes beyond the record (an append cut short before its record): refused when reading,
    # dropped when reopening to append
    values.write_bytes(data + b"\0" * 12)
    with pytest.raises(ValueError, match="12 bytes beyond the store's record"):
        FeatureStore.open(tmp_path / "store")
    store = FeatureStore.open(tmp_path / "store", mode="a")
    assert values.stat().st_size == len(data)
    assert torch.equal(store.blocks().block(49), blocks[49])
    offsets = tmp_path / "store" / "offsets.i64"
    corrupt = np.fromfile(offsets, np.int64)
    corrupt[-1] += 1
    corrupt.tofile(offsets)
    with pytest.raises(ValueError, match="corrupt"):
        FeatureStore.open(tmp_path / "store")


def test_creating_over_a_store_or_other_files_is_refused(tmp_path):
    blocks, _ = _pool()
    _filled(tmp_path / "store", blocks)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        FeatureStore.create(tmp_path / "store")
    assert len(FeatureStore.create(tmp_path / "store", overwrite=True)) == 0
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not a feature store"):
        FeatureStore.create(tmp_path / "mine", overwrite=True)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    with pytest.raises(FileNotFoundError, match="no store.json"):
        FeatureStore.open(tmp_path / "mine")
    (tmp_path / "store" / "store.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="not a FisherSFT feature store"):
        FeatureStore.open(tmp_path / "store")


# -- FisherSubsetDataModule(selection_options=SubsetSelectionOptions(feature_dir=...)) ----------


def _in_memory_features(weighted=False):
    from lightning_info.lm.features import response_features
    from tests import tiny_lm

    return response_features(
        tiny_lm.finetuner().model,
        tiny_lm.tokenizer(),
        tiny_lm.pool(),
        max_length=96,
        progress=False,
        curvature_weights=weighted,
    )


def _fitted(options, **kwargs):
    from lightning.pytorch import Trainer

    from tests import tiny_lm
    from tests.tiny import QUIET

    data = tiny_lm.subset_data(selection_options=options, **kwargs)
    Trainer(**{**QUIET, "max_steps": 1}).fit(tiny_lm.finetuner(), datamodule=data)
    return data


@pytest.mark.parametrize("weighting", ["none", "p(1-p)"])
def test_the_data_module_streams_the_pool_to_disk_and_selects_from_it(tmp_path, weighting):
    from lightning_info.methods.fisher_sft import SubsetSelectionOptions
    from lightning_info.methods.fisher_sft.sampler import select_subset

    options = SubsetSelectionOptions(
        token_weighting=weighting, feature_dir=str(tmp_path), embed_batch_size=5
    )
    data = _fitted(options)
    weighted = weighting != "none"
    features, weights = _in_memory_features(weighted) if weighted else (_in_memory_features(), None)
    store = FeatureStore.open(tmp_path / "rank0", sketch=None)
    assert data.feature_store.path == tmp_path / "rank0" and len(store) == 24 == data.embedded_rows
    # appended 5 examples at a time, the rows of the whole pool embedded at once
    assert torch.allclose(store.blocks().values, features.values, atol=1e-5)
    assert torch.equal(store.blocks().offsets, features.offsets)
    if weighted:
        assert torch.allclose(store.token_weights(), weights, atol=1e-6)
    expected = select_subset(features, 8, token_weights=weights)
    assert data.selection.indices == expected.indices
    assert data.selection.objective == pytest.approx(expected.objective, abs=1e-4)


def test_two_round_in_one_process_selects_by_greedi_over_the_store(tmp_path):
    from lightning_info.methods.fisher_sft import SubsetSelectionOptions
    from lightning_info.methods.fisher_sft.dask_select import store_two_round_select

    options = SubsetSelectionOptions(feature_dir=str(tmp_path), two_round=True, store_shards=3)
    data = _fitted(options)
    store = FeatureStore.open(tmp_path / "rank0")
    assert data.selection.indices == store_two_round_select(store, 8, 3).indices
    hand_built = []  # round 1 by hand: each contiguous third of the in-memory pool
    features = _in_memory_features()
    for start in (0, 8, 16):
        shard = TokenBlocks.from_list(features.to_list()[start : start + 8])
        hand_built += [start + i for i in fisher_greedy_select(shard, 8).indices]
    assert set(data.selection.indices) <= set(hand_built)


def test_a_sketched_pool_is_stored_at_the_sketch_width_and_recorded(tmp_path):
    from lightning_info.methods.fisher_sft import SubsetSelectionOptions
    from lightning_info.methods.fisher_sft.functional import sketch_features

    options = SubsetSelectionOptions(sketch_dim=4, sketch_seed=2, feature_dir=str(tmp_path))
    _fitted(options)
    store = FeatureStore.open(tmp_path / "rank0", sketch=FeatureSketch(4, 2))
    expected = sketch_features(_in_memory_features(), FeatureSketch(4, 2))
    assert store.dim == 4 and torch.allclose(store.blocks().values, expected.values, atol=1e-5)
    with pytest.raises(ValueError, match="made with sketch"):
        FeatureStore.open(tmp_path / "rank0", sketch=None)


def test_feature_dir_under_ddp_without_two_round_is_refused_before_embedding(tmp_path):
    from types import SimpleNamespace

    from lightning_info.methods.fisher_sft import SubsetSelectionOptions
    from tests import tiny_lm

    data = tiny_lm.subset_data(selection_options=SubsetSelectionOptions(feature_dir=str(tmp_path)))
    data.trainer = SimpleNamespace(world_size=2, global_rank=0)
    with pytest.raises(ValueError, match="needs `two_round=True`"):
        data._select()
    assert data.embedded_rows == 0 and not (tmp_path / "rank0").exists()
    with pytest.raises(ValueError, match="store_shards"):
        SubsetSelectionOptions(store_shards=0)


class StoreProbe(Callback):
    """Writes each rank's selection and store path at the start of training (ddp_spawn)."""

    def __init__(self, out_dir):
        self.out_dir = out_dir

    def on_train_start(self, trainer, pl_module):
        data = trainer.datamodule
        record = {
            "indices": data.selection.indices,
            "store": str(data.feature_store.path),
            "gathered": data.gathered_examples,
        }
        (self.out_dir / f"probe{trainer.global_rank}.json").write_text(json.dumps(record))


def test_ddp_ranks_write_their_own_stores_and_merge_their_picks(tmp_path):
    from lightning.pytorch import Trainer

    from lightning_info.methods.fisher_sft import SubsetSelectionOptions
    from lightning_info.methods.fisher_sft.functional import two_round_greedy_select
    from tests import tiny_lm
    from tests.tiny import QUIET, ReleaseProcessGroup

    options = SubsetSelectionOptions(
        token_weighting="p(1-p)", two_round=True, feature_dir=str(tmp_path / "features")
    )
    trainer = Trainer(
        **{**QUIET, "max_steps": 1},
        strategy="ddp_spawn",
        devices=2,
        callbacks=[StoreProbe(tmp_path), ReleaseProcessGroup()],
    )
    trainer.fit(
        tiny_lm.finetuner(), datamodule=tiny_lm.subset_data(batch_size=2, selection_options=options)
    )
    records = [json.loads((tmp_path / f"probe{r}.json").read_text()) for r in (0, 1)]
    features, weights = _in_memory_features(weighted=True)
    expected = two_round_greedy_select(features, 8, 2, token_weights=weights)
    assert records[0]["indices"] == records[1]["indices"] == expected.indices
    assert records[0]["gathered"] == 16  # only the picks met on rank 0
    for rank in (0, 1):
        assert records[rank]["store"] == str(tmp_path / "features" / f"rank{rank}")
        store = FeatureStore.open(tmp_path / "features" / f"rank{rank}")
        shard = features.to_list()[rank::2]  # the strided shard this rank embedded
        assert len(store) == 12
        assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(store.blocks().to_list(), shard))
