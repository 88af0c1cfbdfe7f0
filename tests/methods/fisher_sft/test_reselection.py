"""FisherReselection: each new subset against a selection made by hand from the model's weights
at that epoch's end, exclusion, the plateau schedule, the served loader, the logged compute and
refusals."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from lightning.pytorch import Callback, Trainer
from lightning.pytorch.loggers import CSVLogger

from lightning_info import FisherReselection
from lightning_info.lm.features import response_features
from lightning_info.methods.fisher_sft.sampler import select_subset
from tests import tiny_lm
from tests.tiny import QUIET, TinyClassifier, TinyDataModule

BUDGET = 6


class WeightsAtEpochEnd(Callback):
    """Copies of the fine-tuned LM at each epoch's end, before a re-selection (list it first),
    and the pool rows each epoch's batches served."""

    def __init__(self):
        self.models, self.served, self.served_rows, self._count = [], [], [], 0

    def on_train_epoch_start(self, trainer, pl_module):
        self.served_rows.append(list(trainer.datamodule.sampler.indices))

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._count += batch["input_ids"].shape[0]

    def on_train_epoch_end(self, trainer, pl_module):
        self.models.append(copy.deepcopy(pl_module.model).eval())
        self.served.append(self._count)
        self._count = 0


def _by_hand(model, exclude=()):
    kept = [i for i in range(tiny_lm.POOL_SIZE) if i not in set(exclude)]
    features = response_features(
        model, tiny_lm.tokenizer(), tiny_lm.pool().select(kept), max_length=96, progress=False
    )
    return [kept[i] for i in select_subset(features, BUDGET).indices]


def _fit(callbacks, epochs=3, data=None, **kwargs):
    data = data or tiny_lm.subset_data(budget=BUDGET, batch_size=3)
    trainer = Trainer(
        **{**QUIET, "max_epochs": epochs, "reload_dataloaders_every_n_epochs": 1, **kwargs},
        callbacks=callbacks,
        limit_val_batches=0,
    )
    trainer.fit(tiny_lm.finetuner(lora=False), datamodule=data)  # features that move
    return trainer, data


@pytest.mark.parametrize("exclude", [False, True])
def test_each_new_subset_is_the_selection_from_the_weights_at_that_epoch_s_end(exclude):
    weights = WeightsAtEpochEnd()
    reselection = FisherReselection(every_n_epochs=1, exclude_served=exclude)
    _, data = _fit([weights, reselection], epochs=3)
    history = data.selection_history
    assert [entry["epoch"] for entry in history] == [0, 1, 2]
    assert history[1]["indices"] != history[0]["indices"]  # the features did change
    served = []
    for entry, model in zip(history[1:], weights.models):
        expected = _by_hand(model, served + history[0]["indices"] if exclude else ())
        assert entry["indices"] == expected
        served += entry["indices"]
    if exclude:
        flat = [i for entry in history for i in entry["indices"]]
        assert len(set(flat)) == len(flat) == 3 * BUDGET
    assert weights.served_rows == [entry["indices"] for entry in history]  # each epoch its own
    assert weights.served == [BUDGET] * 3
    assert reselection.rounds == 2
    assert reselection.embedded_examples == 3 * tiny_lm.POOL_SIZE


def test_every_n_epochs_sets_the_rounds_and_the_compute_is_logged(tmp_path):
    reselection = FisherReselection(every_n_epochs=2)
    trainer, data = _fit([reselection], epochs=5, logger=CSVLogger(tmp_path))
    assert [entry["epoch"] for entry in data.selection_history] == [0, 2, 4]
    metrics = trainer.callback_metrics
    assert metrics["reselection/rounds"].item() == 2
    last, before = (set(entry["indices"]) for entry in data.selection_history[:-3:-1])
    assert metrics["reselection/new_fraction"].item() == len(last - before) / BUDGET
    assert metrics["reselection/embedded_examples"].item() == 3 * tiny_lm.POOL_SIZE
    assert metrics["reselection/trained_examples"].item() == 5 * BUDGET


class Scripted(Callback):
    """Puts a scripted value of ``score`` in the callback metrics at each epoch's end."""

    def __init__(self, values):
        self.values = values

    def on_train_epoch_end(self, trainer, pl_module):
        trainer.callback_metrics["score"] = torch.tensor(self.values[trainer.current_epoch])


@pytest.mark.parametrize(
    ("mode", "values", "patience", "epochs"),
    [
        ("min", [3.0, 2.0, 2.0, 2.0, 1.0, 1.0], 1, [0, 3, 4]),
        ("min", [3.0, 2.0, 2.0, 2.0, 1.0, 1.0], 2, [0, 4]),
        ("max", [1.0, 2.0, 1.5, 3.0, 3.0, 0.0], 1, [0, 3, 5]),
    ],
)
def test_on_a_plateau_of_the_monitored_metric(mode, values, patience, epochs):
    reselection = FisherReselection(
        every_n_epochs=None, monitor="score", mode=mode, patience=patience
    )
    _, data = _fit([Scripted(values), reselection], epochs=len(values))
    assert [entry["epoch"] for entry in data.selection_history] == epochs


def test_a_metric_never_logged_is_named():
    with pytest.raises(KeyError, match=r"monitors 'val/nll', which was not logged"):
        _fit([FisherReselection(every_n_epochs=None, monitor="val/nll")], epochs=2)


def test_random_subsets_are_drawn_anew_each_round():
    data = tiny_lm.subset_data(budget=BUDGET, batch_size=3, strategy="random")
    _, data = _fit([FisherReselection(every_n_epochs=1)], epochs=3, data=data)
    first, second, third = (entry["indices"] for entry in data.selection_history)
    assert first != second != third
    assert first == select_subset(None, BUDGET, strategy="random", pool_size=24, seed=0).indices
    assert second == select_subset(None, BUDGET, strategy="random", pool_size=24, seed=1).indices


def test_refusals_at_setup():
    with pytest.raises(ValueError, match=r"set Trainer\(reload_dataloaders_every_n_epochs=1\)"):
        _fit([FisherReselection()], reload_dataloaders_every_n_epochs=0)
    with pytest.raises(ValueError, match=r"may need 30 examples \(5 subsets of 6 over 5 epochs\)"):
        _fit([FisherReselection(exclude_served=True)], epochs=5)
    with pytest.raises(TypeError, match=r"selects through a FisherSubsetDataModule"):
        Trainer(**QUIET, max_epochs=1, callbacks=[FisherReselection()]).fit(
            TinyClassifier(), datamodule=TinyDataModule()
        )


def test_state_round_trip_and_another_schedule_refused():
    reselection = FisherReselection(every_n_epochs=None, monitor="score")
    _, data = _fit([Scripted([3.0, 3.0, 3.0]), reselection], epochs=3)
    assert reselection.rounds == 1 and reselection.pending == 3  # decided after the last epoch
    restored = FisherReselection(every_n_epochs=None, monitor="score")
    restored.load_state_dict(reselection.state_dict())
    assert (restored.best, restored.waited, restored.pending) == (3.0, 0, 3)
    with pytest.raises(ValueError, match=r"ran the schedule \[None, 'score', 'min', False\]"):
        FisherReselection(every_n_epochs=2).load_state_dict(reselection.state_dict())
    fresh = tiny_lm.subset_data(budget=BUDGET, batch_size=3)
    fresh.load_state_dict(data.state_dict())
    assert fresh.selection_history == data.selection_history


class ServedRows(Callback):
    """Writes, per rank, the subsets of the data module's history and the pool rows each
    epoch's batches served on that rank."""

    def __init__(self, out_dir):
        self.out_dir, self.rows = out_dir, []

    def on_train_epoch_start(self, trainer, pl_module):
        self.rows.append([])

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        tokenizer = tiny_lm.tokenizer()
        self.rows[-1] += [
            tokenizer.decode(ids[ids != tokenizer.pad_token_id]) for ids in batch["input_ids"]
        ]

    def on_train_end(self, trainer, pl_module):
        history = [entry["indices"] for entry in trainer.datamodule.selection_history]
        record = {"history": history, "rows": self.rows}
        (self.out_dir / f"rank{trainer.global_rank}.json").write_text(json.dumps(record))


@pytest.mark.parametrize("two_round", [False, True])
def test_under_ddp_every_rank_trains_on_the_same_new_subset(tmp_path, two_round):
    from lightning_info.methods.fisher_sft.datamodule import SubsetSelectionOptions
    from tests.tiny import ReleaseProcessGroup

    options = SubsetSelectionOptions(two_round=two_round)
    data = tiny_lm.subset_data(budget=BUDGET, batch_size=3, selection_options=options)
    _fit(
        [FisherReselection(every_n_epochs=1), ServedRows(tmp_path), ReleaseProcessGroup()],
        epochs=3,
        data=data,
        strategy="ddp_spawn",
        devices=2,
    )
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    history = records[0]["history"]
    assert records[1]["history"] == history and len(history) == 3
    assert history[1] != history[0]
    pool, tokenizer = tiny_lm.pool(), tiny_lm.tokenizer()
    for epoch, subset in enumerate(history):  # the two ranks' halves make up the epoch's subset
        ids = data.collate([pool[i] for i in subset])["input_ids"]
        expected = sorted(tokenizer.decode(row[row != tokenizer.pad_token_id]) for row in ids)
        assert sorted(records[0]["rows"][epoch] + records[1]["rows"][epoch]) == expected
