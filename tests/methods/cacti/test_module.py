"""The CACTI module and its network: batched imputation equals one row at a time, observed values
are never read or changed, training lowers the error, a network can be injected (and must fit
the table), bad input is refused."""

from __future__ import annotations

from dataclasses import replace

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader

from lightning_info.data.splits import gathered_batch
from lightning_info.methods.cacti.datamodule import imputation_rows
from lightning_info.methods.cacti.functional import inference_layout, kept_mask
from lightning_info.methods.cacti.module import CACTI, CACTI_OPTIMIZER, build_cacti
from lightning_info.methods.cacti.networks import CACTINetwork, sincos_positions

TINY = {"embed_dim": 16, "encoder_depth": 2, "decoder_depth": 2, "num_heads": 2}


def tiny(columns=7, context=True, **kwargs):
    torch.manual_seed(0)
    embeddings = torch.randn(columns, 5) if context else None
    network = CACTINetwork(columns, 5 if context else None, **TINY)
    return CACTI(columns, embeddings, use_context=context, network=network, **kwargs).eval()


def loader(values, observed, batch_size):
    rows = imputation_rows(values.numpy(), observed.numpy(), torch.zeros_like(observed).numpy())
    return DataLoader(rows, batch_size=batch_size, collate_fn=gathered_batch)


def table(rows=40, columns=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    values = torch.rand(rows, columns, generator=g)
    observed = torch.rand(rows, columns, generator=g) > 0.4
    observed[0] = True  # a complete row
    observed[1] = False
    observed[1, 3] = True  # a row with one observed value
    return values, observed


@pytest.mark.parametrize("context", [True, False])
def test_batched_imputation_equals_one_row_at_a_time(context):
    model = tiny(context=context)
    values, observed = table()
    batched = model.impute(values, observed)
    single = torch.cat(
        [model.impute(values[i : i + 1], observed[i : i + 1]) for i in range(values.shape[0])]
    )
    assert torch.allclose(batched, single, atol=1e-5, rtol=0)
    # and a batch of other rows (other padding) gives a row the same prediction
    mixed = model.impute(values[[5, 0, 1]], observed[[5, 0, 1]])
    assert torch.allclose(mixed[0], batched[5], atol=1e-5, rtol=0)


def test_observed_values_are_returned_unchanged_and_unobserved_ones_never_read():
    model = tiny()
    values, observed = table()
    imputed = model.impute(values, observed)
    assert torch.equal(imputed[observed], values[observed])
    assert ((imputed[~observed] >= 0) & (imputed[~observed] <= 1)).all()
    poisoned = torch.where(observed, values, torch.nan)
    assert torch.equal(model.impute(poisoned, observed)[~observed], imputed[~observed])


def test_sincos_positions_match_the_closed_form():
    positions = sincos_positions(5, 8)
    p, k = 3, 2
    omega = 10000 ** (-k / 4)
    assert positions[p, k].item() == pytest.approx(torch.sin(torch.tensor(p * omega)).item())
    assert positions[p, 4 + k].item() == pytest.approx(torch.cos(torch.tensor(p * omega)).item())


def test_padding_slots_do_not_change_a_rows_encoding():
    model = tiny()
    values, observed = table(rows=2)
    positions, padding = inference_layout(~observed)
    reference = model(values, observed, positions, padding)
    wider_positions = torch.cat([positions, torch.zeros(2, 3, dtype=positions.dtype)], 1)
    wider_padding = torch.cat([padding, torch.ones(2, 3, dtype=torch.bool)], 1)
    assert torch.allclose(
        model(values, observed, wider_positions, wider_padding), reference, atol=1e-6
    )
    assert kept_mask(wider_positions, wider_padding, 7).equal(observed)


def test_training_lowers_the_reconstruction_error(one_torch_thread):
    g = torch.Generator().manual_seed(2)
    latent = torch.rand(256, 1, generator=g)
    values = torch.cat(
        [
            latent,
            1 - latent,
            latent**2,
            (latent + 0.1 * torch.rand(256, 1, generator=g)).clamp(0, 1),
        ],
        1,
    )
    observed = torch.rand(256, 4, generator=g) > 0.25
    observed[:, 0] = True
    model = CACTI(
        4,
        torch.eye(4),
        network=CACTINetwork(4, 4, embed_dim=16, encoder_depth=1, decoder_depth=1, num_heads=2),
        optimizer=replace(CACTI_OPTIMIZER, lr=3e-3),
    )

    def error(m):
        hidden = observed.clone()
        hidden[:, 1] = False
        with torch.no_grad():
            return ((m.impute(values, hidden)[:, 1] - values[:, 1]) ** 2).mean().item()

    before = error(model.eval())
    pl.seed_everything(0)
    trainer = pl.Trainer(
        max_epochs=60,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model.train(), train_dataloaders=loader(values, observed, 64))
    after = error(model.eval())
    assert after < 0.25 * before and after < 0.01, (before, after)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="context_embeddings"):
        CACTI(5)
    with pytest.raises(ValueError, match=r"\(num_columns=5, E\)"):
        CACTI(5, torch.zeros(4, 3))
    with pytest.raises(ValueError, match="NaN"):
        CACTI(2, torch.full((2, 3), torch.nan))
    with pytest.raises(ValueError, match="multiple of 4"):
        CACTINetwork(5, embed_dim=18, num_heads=2)
    with pytest.raises(ValueError, match="num_columns"):
        CACTI(1, use_context=False)
    with pytest.raises(ValueError, match="built for 6 columns, CACTI for num_columns=5"):
        CACTI(5, use_context=False, network=CACTINetwork(6, **TINY))
    with pytest.raises(ValueError, match=r"context_dim \(None\) must be the context embeddings' "):
        CACTI(5, torch.zeros(5, 3), network=CACTINetwork(5, **TINY))
    with pytest.raises(ValueError, match=r"context_dim \(4\) must be .* width \(3; "):
        CACTI(5, torch.zeros(5, 3), network=CACTINetwork(5, 4, **TINY))
    with pytest.raises(ValueError, match=r"context_dim \(3\) must be .* \(None; None without"):
        CACTI(5, use_context=False, network=CACTINetwork(5, 3, **TINY))
    with pytest.raises(TypeError, match="`optimizer` must be an AdamWOptions"):
        CACTI(5, use_context=False, optimizer={"lr": 1e-3})
    with pytest.raises(TypeError, match="`network` must be an nn.Module"):
        CACTI(5, use_context=False, network="CACTINetwork")
    with pytest.raises(ValueError, match="either `network` or its arguments"):
        build_cacti(5, None, {"embed_dim": 8, "network": CACTINetwork(5)}, use_context=False)
    with pytest.raises(ValueError, match="context_embeddings"):
        build_cacti(5, None, {"embed_dim": 8})


def test_batches_with_nan_at_observed_entries_or_wrong_shapes_are_refused():
    model = tiny()
    values, observed = table(rows=4)
    values[2, 4], observed[2, 4] = torch.nan, True
    with pytest.raises(ValueError, match="NaN or infinity at entries `observed` marks"):
        model.impute(values, observed)
    with pytest.raises(ValueError, match="NaN or infinity"):
        tiny(validate_args=True).training_step({"values": values, "observed": observed}, 0)
    with pytest.raises(ValueError, match=r"\(rows, 7\)"):
        model.impute(values[:, :6], observed[:, :6])
    with pytest.raises(ValueError, match="boolean"):
        model.impute(values.nan_to_num(), observed.float())


def test_a_checkpoint_restores_the_context_buffer(tmp_path):
    model = tiny()
    trainer = pl.Trainer(
        max_steps=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    values, observed = table(rows=8)
    trainer.fit(model.train(), train_dataloaders=loader(values, observed, 8))
    trainer.save_checkpoint(tmp_path / "cacti.ckpt")
    # the network is not a hyperparameter: the same architecture is passed again
    restored = CACTI.load_from_checkpoint(
        tmp_path / "cacti.ckpt", network=CACTINetwork(7, 5, **TINY)
    ).eval()
    assert torch.equal(restored.context, model.context)
    assert restored.hparams.optimizer == CACTI_OPTIMIZER
    assert torch.equal(restored.impute(values, observed), model.eval().impute(values, observed))


def test_the_default_network_is_built_as_before_and_settings_route_to_their_owners():
    torch.manual_seed(0)
    default = CACTI(7, torch.ones(7, 5))
    torch.manual_seed(0)
    injected = CACTI(7, torch.ones(7, 5), network=CACTINetwork(7, 5))
    assert isinstance(default.network, CACTINetwork)
    assert (default.network.context_dim, len(default.network.encoder)) == (5, 10)
    for (name, a), (_, b) in zip(default.state_dict().items(), injected.state_dict().items()):
        assert torch.equal(a, b), name
    settings = {"embed_dim": 8, "decoder_depth": 1, "lr": 2e-3, "copy_probability": 0.5}
    torch.manual_seed(0)
    built = build_cacti(7, torch.ones(7, 5), settings, seed=3)
    assert (built.network.context_dim, len(built.network.decoder)) == (5, 1)
    assert built.network.head.in_features == 8 and built.copy_probability == 0.5
    assert built.hparams.optimizer == replace(CACTI_OPTIMIZER, lr=2e-3) and built.seed == 3
    assert settings == {"embed_dim": 8, "decoder_depth": 1, "lr": 2e-3, "copy_probability": 0.5}
    ablation = build_cacti(7, torch.ones(7, 5), {"embed_dim": 8}, use_context=False)
    assert ablation.network.context_dim is None and not ablation.use_context


def test_a_network_refuses_to_be_called_without_its_context():
    model = tiny()
    values, observed = table(rows=3)
    positions, padding = inference_layout(~observed)
    with pytest.raises(ValueError, match="built with context_dim=5: pass"):
        model.network(values, observed, positions, padding)
    with pytest.raises(ValueError, match="built without context tokens"):
        tiny(context=False).network(values, observed, positions, padding, torch.ones(7, 5))


@pytest.mark.parametrize("use_context", [True, False])
def test_fits_with_a_logger_beside_its_data_module(tmp_path, use_context):
    """The module's context width (the embeddings', or none) may differ from the data module's
    requested ``context_dim``: a logger must not refuse the pair's hyperparameters."""
    from lightning.pytorch.loggers import CSVLogger

    from lightning_info.methods.cacti import TabularImputationDataModule

    data = TabularImputationDataModule("wine", context="tfidf", batch_size=32)  # context_dim 32
    width = data.context_embeddings.shape[1]
    network = CACTINetwork(data.num_columns, width if use_context else None, **TINY)
    model = CACTI(
        data.num_columns, data.context_embeddings, use_context=use_context, network=network
    )
    trainer = pl.Trainer(
        max_steps=1,
        limit_val_batches=1,
        logger=CSVLogger(tmp_path),
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    trainer.fit(model, datamodule=data)
    logged = (tmp_path / "lightning_logs" / "version_0" / "hparams.yaml").read_text()
    assert "context_dim: 32" in logged  # the data module's, logged once
    assert model.hparams.context_dim == (width if use_context else None)
