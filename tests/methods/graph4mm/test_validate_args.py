"""Graph4MM's forward pass reads nothing back from the device unless ``validate_args`` asks for
the value checks: the queries are gathered into the prompt and an unlabelled batch's
discriminative term is a tensor expression, both equal to the loops and branches they replace."""

from __future__ import annotations

from types import SimpleNamespace

import lightning.pytorch as pl
import pytest
import torch
import torch.nn.functional as F

from lightning_info.methods.graph4mm.module import Graph4MM
from lightning_info.methods.graph4mm.qformer import MMQFormer
from tests.methods.graph4mm import tiny
from tests.test_hot_path import count_host_reads
from tests.tiny import QUIET


def test_a_training_step_reads_nothing_without_the_switch():
    model = tiny.module()
    assert model.validate_args is False
    pl.seed_everything(0)
    with count_host_reads() as reads:
        pl.Trainer(max_steps=2, limit_val_batches=0, **QUIET).fit(model, tiny.data())
    assert reads.batches == 2 and reads.total == 0, reads.describe()


def test_with_the_switch_nan_images_and_slots_outside_the_prompt_are_refused():
    batch = tiny.data().collate(tiny.data().train_graphs[:2])
    batch["images"][0, 0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"`images` contains 1 NaN/inf"):
        tiny.module(validate_args=True).training_step(batch, 0)
    loss = tiny.module().training_step(batch, 0)  # unchecked: the NaN flows on, as in torch
    assert loss.dim() == 0
    batch = tiny.data().collate(tiny.data().train_graphs[:2])
    batch["query_position"][1] = batch["prompt_ids"].shape[1]
    with pytest.raises(ValueError, match="`query_position` must index the prompt"):
        tiny.module(validate_args=True).training_step(batch, 0)


def _spliced(embeds, mask, slots, queries):
    """The queries written at each sample's slot by slicing, one sample at a time."""
    rows, masks = [], []
    for b, slot in enumerate(slots.tolist()):
        rows.append(torch.cat([embeds[b, :slot], queries[b], embeds[b, slot + 1 :]]))
        masks.append(
            torch.cat([mask[b, :slot], mask.new_ones(queries.shape[1]), mask[b, slot + 1 :]])
        )
    return torch.stack(rows), torch.stack(masks)


@pytest.mark.parametrize("queries", [0, 1, 3])
def test_the_gathered_prompt_is_the_spliced_one_with_its_gradients(queries):
    g = torch.Generator().manual_seed(queries)
    for _ in range(20):
        b, p = (
            int(torch.randint(1, 5, (1,), generator=g)),
            int(torch.randint(1, 9, (1,), generator=g)),
        )
        embeds = torch.randn(b, p, 4, generator=g, requires_grad=True)
        extra = torch.randn(b, queries, 4, generator=g, requires_grad=True)
        mask = torch.randint(0, 2, (b, p), generator=g)
        slots = torch.randint(0, p, (b,), generator=g)
        model = SimpleNamespace(_embed=lambda ids, embeds=embeds: embeds, validate_args=False)
        batch = {"prompt_ids": None, "prompt_mask": mask, "query_position": slots}
        rows, masks = Graph4MM.prompt_embeddings(model, batch, extra)
        expected_rows, expected_masks = _spliced(embeds, mask, slots, extra)
        assert torch.equal(rows, expected_rows) and torch.equal(masks, expected_masks)
        weights = torch.randn(rows.shape, generator=g)
        inputs = [embeds, extra] if queries else [embeds]
        ours = torch.autograd.grad((rows * weights).sum(), inputs)
        theirs = torch.autograd.grad((expected_rows * weights).sum(), inputs)
        assert all(torch.equal(a, b) for a, b in zip(ours, theirs))


@pytest.mark.parametrize("labels", [[0, 2, 1, 1], [-1, 2, -1, 0], [-1, -1, -1, -1]])
def test_the_discriminative_term_is_the_mean_over_the_labelled_rows(labels):
    model = tiny.module(task="both", class_weight=0.7)
    batch = tiny.data().collate(tiny.data().train_graphs[:4])
    batch["label"] = torch.tensor(labels)
    loss, generation, class_logits, _ = model._losses(batch)
    labelled = batch["label"] >= 0
    if labelled.any():
        classify = F.cross_entropy(class_logits[labelled], batch["label"][labelled])
        expected = generation + 0.7 * classify
    else:
        expected = generation + 0.0 * class_logits.sum()
    assert torch.equal(loss, expected)
    head = list(model.classifier.parameters())
    ours = torch.autograd.grad(loss, head, retain_graph=True)
    theirs = torch.autograd.grad(expected, head)
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))


def test_the_qformer_checks_its_image_mask_only_when_asked():
    torch.manual_seed(0)
    former = MMQFormer(8, image_dim=4, text_dim=3, out_dim=6, num_queries=2, heads=2)
    assert former.validate_args is False
    image, text = torch.randn(2, 3, 4), torch.randn(2, 5, 3)
    empty = torch.zeros(2, 3, dtype=torch.bool)
    assert former(image, text, image_mask=empty).shape == (2, 2, 6)  # no read of the mask
    former.validate_args = True
    with pytest.raises(ValueError, match="at least one image token"):
        former(image, text, image_mask=empty)
