"""Graph4MM: the queries reach the frozen LM at their placeholder positions, padding anywhere in
a row changes nothing, each variant reads what it should, only the trainable parts train, and
the logged metrics equal a hand computation."""

from __future__ import annotations

import pytest
import torch
from lightning.pytorch import Trainer
from torchmetrics.functional.text.rouge import rouge_score

from lightning_info.core.options import AdamWOptions
from lightning_info.methods.graph4mm.decoding import greedy_decode
from lightning_info.methods.graph4mm.encoders import SmallConvEncoder
from lightning_info.methods.graph4mm.module import VARIANTS, Graph4MM, variant_qformer
from lightning_info.methods.graph4mm.qformer import MMQFormer
from tests.methods.graph4mm import tiny


def _batch(graphs):
    return tiny.data().collate(graphs)


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_graph_in_a_padded_batch_equals_the_graph_alone(variant):
    model = tiny.module(variant).eval()
    graphs = tiny.data().train_graphs[:4]
    logits, hidden = model(_batch(graphs))
    for i, g in enumerate(graphs):
        alone_logits, alone_hidden = model(_batch([g]))
        r = alone_logits.shape[1]
        torch.testing.assert_close(logits[i, :r], alone_logits[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(hidden[i], alone_hidden[0], atol=1e-5, rtol=1e-5)


def _row(model, batch, i, queries):
    """Row ``i``'s prompt embeddings built by hand: its tokens, the queries at the slot."""
    embed = model.lm.get_input_embeddings()
    ids = batch["prompt_ids"][i][batch["prompt_mask"][i].bool()]
    slot = int(batch["query_position"][i]) - (batch["prompt_ids"].shape[1] - len(ids))
    return torch.cat([embed(ids[:slot]), queries[i], embed(ids[slot + 1 :])])[None]


@pytest.mark.parametrize("variant", ["graph4mm", "text_only"])
def test_the_queries_sit_at_the_placeholder_slot_of_the_prompt(variant):
    model = tiny.module(variant).eval()
    batch = _batch(tiny.data().train_graphs[:1])
    queries = model.query_tokens(batch)
    target = model.lm.get_input_embeddings()(batch["target_ids"])
    row = torch.cat([_row(model, batch, 0, queries), target], dim=1)
    direct = model.lm(inputs_embeds=row, output_hidden_states=True)
    start = row.shape[1] - target.shape[1] - 1
    logits, hidden = model(batch)
    torch.testing.assert_close(logits, direct.logits[:, start : start + logits.shape[1]])
    torch.testing.assert_close(hidden, direct.hidden_states[-1][:, start])
    assert queries.shape == ((1, 3, 16) if variant == "graph4mm" else (1, 0, 16))


def _rewired(batch):
    """The same nodes with every edge among non-centre nodes flipped."""
    out = dict(batch)
    adjacency = batch["adjacency"].clone()
    real = batch["node_mask"][:, :, None] & batch["node_mask"][:, None, :]
    inner = real.clone()
    inner[:, 0, :] = inner[:, :, 0] = False
    eye = torch.eye(adjacency.shape[-1], dtype=torch.bool)
    adjacency[inner & ~eye] = ~adjacency[inner & ~eye]
    out["adjacency"] = adjacency
    return out


def test_each_variant_reads_what_it_should():
    batch = _batch(tiny.data().train_graphs[:4])
    other_images = dict(batch, images=torch.rand_like(batch["images"]))
    other_texts = dict(batch, node_text_ids=batch["node_text_ids"].flip(-1))
    for variant, graph, images, texts in [
        ("graph4mm", True, True, True),
        ("agnostic", False, True, True),
        ("image_only", False, True, False),
        ("text_only", False, False, False),
    ]:
        model = tiny.module(variant).eval()
        base = model(batch)[0]
        for changed, reads in (
            (_rewired(batch), graph),
            (other_images, images),
            (other_texts, texts),
        ):
            moved = not torch.allclose(model(changed)[0], base, atol=1e-6)
            assert moved == reads, variant


def test_only_the_trainable_parts_train_and_the_lm_stays_frozen():
    for lora in (None, {"r": 2, "lora_alpha": 4, "target_modules": ["c_attn"]}):
        model = tiny.module(lora=lora)
        before = {k: v.clone() for k, v in model.state_dict().items()}
        trainer = Trainer(
            max_steps=2,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            limit_val_batches=0,
        )
        trainer.fit(model, tiny.data())
        after = model.state_dict()
        changed = {k for k in before if not torch.equal(before[k], after[k])}
        lm_changed = {k for k in changed if k.startswith("lm.")}
        assert all("lora_" in k for k in lm_changed)
        assert bool(lm_changed) == (lora is not None)
        assert any(k.startswith("qformer.") for k in changed)
        assert any(k.startswith("image_encoder.") for k in changed)
        assert any(k.startswith("classifier.") for k in changed)
        assert not model.lm.training  # frozen: no dropout even while fitting


def test_logged_metrics_equal_a_hand_computation():
    model = tiny.module()
    dm = tiny.data(batch_size=3)
    trainer = Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False)
    logged = trainer.test(model, dm, verbose=False)[0]
    model.eval()
    predictions, references, nll, tokens, hits, correct = [], [], 0.0, 0, 0, 0
    with torch.no_grad():
        for batch in dm.test_dataloader():
            logits, hidden = model(batch)
            mask = batch["target_mask"].bool()
            nll += float(
                torch.nn.functional.cross_entropy(
                    logits[mask], batch["target_ids"][mask], reduction="sum"
                )
            )
            tokens += int(mask.sum())
            hits += int((logits.argmax(-1) == batch["target_ids"])[mask].sum())
            correct += int((model.classifier(hidden).argmax(-1) == batch["label"]).sum())
            predictions += model.generate(batch)
    references = [g.target for g in dm.test_graphs]
    assert logged["test/loss"] == pytest.approx(nll / tokens, rel=1e-5)
    assert logged["test/token_accuracy"] == pytest.approx(hits / tokens, rel=1e-6)
    assert logged["test/accuracy"] == pytest.approx(correct / len(references), rel=1e-6)
    exact = sum(p == r for p, r in zip(predictions, references)) / len(references)
    assert logged["test/exact_match"] == pytest.approx(exact, abs=1e-7)
    rouge = float(rouge_score(predictions, references, rouge_keys="rougeL")["rougeL_fmeasure"])
    assert logged["test/rougel"] == pytest.approx(rouge, rel=1e-6)


def test_generations_are_the_greedy_continuation_of_queries_and_prompt():
    model = tiny.module().eval()
    batch = _batch(tiny.data().train_graphs[:3])
    texts = model.generate(batch)
    queries = model.query_tokens(batch)
    embed = model.lm.get_input_embeddings()
    eos = tiny.tokenizer().eos_token_id
    for i, text in enumerate(texts):
        row = _row(model, batch, i, queries)
        tokens = []
        for _ in range(model.max_new_tokens):
            token = int(model.lm(inputs_embeds=row).logits[0, -1].argmax())
            if token == eos:
                break
            tokens.append(token)
            row = torch.cat([row, embed(torch.tensor([[token]]))], dim=1)
        assert text == tiny.tokenizer().decode(tokens, skip_special_tokens=True).strip()


def test_greedy_decode_with_padding_in_the_middle_equals_each_row_alone():
    lm = tiny.lm(seed=1)
    embed = lm.get_input_embeddings()
    g = torch.Generator().manual_seed(0)
    rows = [torch.randint(3, 100, (n,), generator=g) for n in (5, 2, 7)]
    prefix = torch.randn(3, 2, 16, generator=g)  # two "query" vectors before each prompt
    width = max(len(r) for r in rows)
    ids = torch.zeros(3, width, dtype=torch.long)
    mask = torch.zeros(3, 2 + width, dtype=torch.long)
    mask[:, :2] = 1
    for i, r in enumerate(rows):
        ids[i, width - len(r) :] = r
        mask[i, 2 + width - len(r) :] = 1
    with torch.no_grad():
        batch = greedy_decode(lm, torch.cat([prefix, embed(ids)], 1), mask, 6, eos_id=2)
        for i, r in enumerate(rows):
            alone = greedy_decode(
                lm,
                torch.cat([prefix[i : i + 1], embed(r[None])], 1),
                torch.ones(1, 2 + len(r)),
                6,
                eos_id=2,
            )
            assert batch[i, : alone.shape[1]].tolist() == alone[0].tolist()


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="variant"):
        tiny.module("hop")
    with pytest.raises(ValueError, match="task"):
        tiny.module(task="summarise")
    qformer = variant_qformer("graph4mm", dim=16, num_queries=2, heads=2)
    model = Graph4MM(
        tiny.lm(),
        tokenizer=None,
        image_encoder=SmallConvEncoder(dim=8),
        qformer=qformer,
        validate_args=True,
    )
    batch = _batch(tiny.data().train_graphs[:2])
    with pytest.raises(ValueError, match="tokenizer"):
        model.generate(batch)
    batch["images"][0, 0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="images"):
        model(batch)


def test_the_default_qformer_is_the_variant_qformer_built_in_place():
    torch.manual_seed(0)
    default = Graph4MM(tiny.lm(), tiny.tokenizer())
    torch.manual_seed(0)
    injected = Graph4MM(tiny.lm(), tiny.tokenizer(), qformer=variant_qformer("graph4mm"))
    assert default.qformer.widths == (64, 16 + 64 + 2, 16) and default.qformer.uses_graph
    for (name, a), (_, b) in zip(default.state_dict().items(), injected.state_dict().items()):
        assert torch.equal(a, b), name
    assert injected.hparams.optimizer == AdamWOptions()


def test_an_injected_qformer_is_used_as_given():
    torch.manual_seed(0)
    built = MMQFormer(8, image_dim=8, text_dim=16 + 8 + 2, out_dim=16, num_queries=2, heads=2)
    model = tiny.module("agnostic", qformer=built)
    assert model.qformer is built and model.query_tokens(
        _batch(tiny.data().train_graphs[:2])
    ).shape == (2, 2, 16)
    assert "qformer" not in model.hparams


def test_a_qformer_that_does_not_fit_is_refused():
    with pytest.raises(ValueError, match=r"widths .* are \(8, 26, 12\).*\(8, 26, 16\)"):
        tiny.module("agnostic", qformer=MMQFormer(8, 8, 26, 12, heads=2))
    with pytest.raises(ValueError, match="graph4mm.*hop settings"):
        tiny.module("graph4mm", qformer=MMQFormer(8, heads=2))
    with pytest.raises(ValueError, match="ignores the graph"):
        tiny.module("agnostic", qformer=MMQFormer(8, heads=2, hop={"alpha": 0.2}))
    with pytest.raises(ValueError, match="text_only variant has no Q-Former"):
        tiny.module("text_only", qformer=MMQFormer(8, heads=2))
    with pytest.raises(TypeError, match="AdamWOptions"):
        tiny.module(optimizer={"lr": 0.1})
    with pytest.raises(ValueError, match="optimizer.lr"):
        AdamWOptions(lr=0.0)


def test_the_optimizer_options_reach_adamw_and_its_schedule():
    model = tiny.module(optimizer=AdamWOptions(lr=0.02, weight_decay=0.1))
    model.trainer = Trainer(logger=False, enable_progress_bar=False)
    optimizer = model.configure_optimizers()
    assert isinstance(optimizer, torch.optim.AdamW)
    assert optimizer.defaults["lr"] == 0.02 and optimizer.defaults["weight_decay"] == 0.1
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    assert {id(p) for g in optimizer.param_groups for p in g["params"]} == trainable


def test_lightning_cli_injects_the_networks_and_reads_the_option_groups(tmp_path):
    from lightning.pytorch.cli import LightningCLI

    from lightning_info.methods.graph4mm import MultimodalGraphDataModule

    tiny.lm().save_pretrained(tmp_path)
    tiny.tokenizer().save_pretrained(tmp_path)
    package = "lightning_info.methods.graph4mm"
    args = [
        f"--model.lm={tmp_path}",
        f"--model.image_encoder={package}.SmallConvEncoder",
        "--model.image_encoder.dim=8",
        f"--model.qformer={package}.MMQFormer",
        "--model.qformer.dim=16",
        "--model.qformer.heads=2",
        "--model.qformer.hop={alpha: 0.2, steps: 3}",
        "--model.optimizer.lr=0.01",
        "--data.num_train=24",
        "--data.num_val=8",
        "--data.num_test=8",
        "--data.digits.homophily=0.5",
        "--trainer.logger=false",
    ]
    cli = LightningCLI(Graph4MM, MultimodalGraphDataModule, run=False, args=args)
    assert cli.model.qformer.widths == (8, 16 + 8 + 2, 16)
    assert cli.model.qformer.hop == {"alpha": 0.2, "steps": 3}
    assert cli.model.optimizer_options == AdamWOptions(lr=0.01)
    assert cli.datamodule.digits.homophily == 0.5
    with pytest.raises(SystemExit):  # a variant outside the Literal is refused while parsing
        LightningCLI(
            Graph4MM,
            MultimodalGraphDataModule,
            run=False,
            args=[f"--model.lm={tmp_path}", "--model.variant=hop"],
        )
