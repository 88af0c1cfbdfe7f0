"""FisherPenaltyMixin on Hugging Face transformers built from configs (default SDPA attention).

With attention dropout 0, PyTorch picks the fused flash kernel on CPU, which has no second
derivative; the mixin runs the host's forward on the math kernel so the double backward works.
"""

from __future__ import annotations

import pytest
import torch
from lightning.pytorch import LightningModule, Trainer, seed_everything
from torch.utils.data import DataLoader, TensorDataset
from transformers import BertConfig, BertForSequenceClassification, GPT2Config, GPT2LMHeadModel

from lightning_info import FisherPenalty, FisherPenaltyMixin
from lightning_info.methods.fic_tsc.functional import fisher_penalty
from lightning_info.methods.fic_tsc.penalty import double_backward_attention
from tests.tiny import QUIET

VOCAB, LENGTH, WEIGHT, LR = 40, 12, 0.05, 0.1


def tiny_gpt2():
    config = GPT2Config(
        n_layer=1,
        n_embd=16,
        n_head=2,
        vocab_size=VOCAB,
        n_positions=32,
        attn_pdrop=0.0,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )
    return GPT2LMHeadModel(config)


def tiny_bert():
    config = BertConfig(
        num_hidden_layers=1,
        hidden_size=16,
        num_attention_heads=2,
        intermediate_size=32,
        vocab_size=VOCAB,
        num_labels=2,
        attention_probs_dropout_prob=0.0,
        hidden_dropout_prob=0.0,
    )
    return BertForSequenceClassification(config)


def batch():
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (4, LENGTH), generator=generator)
    return ids, torch.tensor([0, 1, 1, 0])


def hf_loss(model, ids, labels):
    if isinstance(model, GPT2LMHeadModel):
        return model(input_ids=ids, labels=ids).loss
    return model(input_ids=ids, labels=labels).loss


class Host(LightningModule):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def training_step(self, batch, batch_idx):
        return hf_loss(self.model, *batch)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=LR)


class PenalisedHost(FisherPenaltyMixin, Host):
    fisher_penalty = FisherPenalty(weight=WEIGHT)


@pytest.mark.parametrize("make_model", [tiny_gpt2, tiny_bert], ids=["gpt2", "bert"])
def test_default_attention_has_no_double_backward(make_model):
    seed_everything(0)
    model = make_model()
    loss = hf_loss(model, *batch())
    with pytest.raises(RuntimeError, match="derivative for .*flash_attention"):
        (loss + fisher_penalty(loss, list(model.parameters()))).backward()


@pytest.mark.parametrize("make_model", [tiny_gpt2, tiny_bert], ids=["gpt2", "bert"])
def test_mixin_step_equals_a_manual_double_backward_on_the_math_kernel(make_model, tmp_path):
    seed_everything(0)
    module = PenalisedHost(make_model())
    initial = {k: v.detach().clone() for k, v in module.model.named_parameters()}
    ids, labels = batch()
    loader = DataLoader(TensorDataset(ids, labels), batch_size=len(ids))
    Trainer(max_steps=1, default_root_dir=tmp_path, **QUIET).fit(module, loader)

    reference = make_model()
    reference.load_state_dict(initial, strict=False)
    params = list(reference.parameters())
    with double_backward_attention():
        loss = hf_loss(reference, ids, labels)
    (loss + WEIGHT * fisher_penalty(loss, params)).backward()
    for (name, after), before in zip(module.model.named_parameters(), params):
        if before.grad is None:
            continue
        torch.testing.assert_close(after, before.detach() - LR * before.grad, msg=name)
