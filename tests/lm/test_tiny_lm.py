import pytest
import torch

from lightning_info.lm.tiny_lm import (
    BOS_TOKEN,
    EOS_TOKEN,
    PAD_TOKEN,
    load_causal_lm,
    tiny_causal_lm,
    train_bpe_tokenizer,
)


def test_tokenizer_round_trips_docstrings_and_unseen_text(tokenizer, pairs):
    samples = [text for _, text in pairs[1::7]]  # mostly texts the tokenizer was not trained on
    samples += ["Ünïcode — 中文 \t tabs\n\n  and  double  spaces ", "x", " leading space"]
    for text in samples:
        ids = tokenizer(text)["input_ids"]
        assert tokenizer.decode(ids) == text
        assert max(ids) < len(tokenizer)


def test_tokenizer_special_tokens_and_padding(tokenizer):
    assert len(tokenizer) == 600
    assert (tokenizer.pad_token, tokenizer.bos_token, tokenizer.eos_token) == (
        PAD_TOKEN,
        BOS_TOKEN,
        EOS_TOKEN,
    )
    assert (tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id) == (0, 1, 2)
    assert 2 not in tokenizer("Return the value.")["input_ids"]
    batch = tokenizer(["a", "Return the sum of the values."], padding=True, return_tensors="pt")
    lengths = batch["attention_mask"].sum(1)
    assert batch["input_ids"].shape[1] == lengths.max()
    assert (batch["input_ids"][0, lengths[0] :] == 0).all()


def test_tokenizer_argument_checks():
    with pytest.raises(ValueError, match="vocab_size"):
        train_bpe_tokenizer(["some text"], vocab_size=100)
    with pytest.raises(ValueError, match="non-empty"):
        train_bpe_tokenizer([])


def test_tiny_lm_matches_tokenizer_and_is_seeded(tokenizer):
    state = torch.random.get_rng_state()
    model = tiny_causal_lm(tokenizer, n_layer=1, n_embd=16, n_head=2, n_positions=32, seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    config = model.config
    assert model.get_input_embeddings().weight.shape == (len(tokenizer), 16)
    assert (config.pad_token_id, config.bos_token_id, config.eos_token_id) == (0, 1, 2)
    assert not model.training
    same = tiny_causal_lm(tokenizer, n_layer=1, n_embd=16, n_head=2, n_positions=32, seed=3)
    other = tiny_causal_lm(tokenizer, n_layer=1, n_embd=16, n_head=2, n_positions=32, seed=4)
    weight = model.transformer.h[0].attn.c_attn.weight
    assert torch.equal(weight, same.transformer.h[0].attn.c_attn.weight)
    assert not torch.equal(weight, other.transformer.h[0].attn.c_attn.weight)
    with pytest.raises(ValueError, match="divisible"):
        tiny_causal_lm(tokenizer, n_embd=30, n_head=4)


def test_last_hidden_state_is_the_pre_logit_embedding(model, tokenizer):
    """``hidden_states[-1]`` is after GPT-2's final layer norm, so ``lm_head`` maps it to logits."""
    ids = tokenizer(["Return the sum of the values."], return_tensors="pt")["input_ids"]
    captured = {}
    hook = model.transformer.h[-1].register_forward_hook(
        lambda module, args, output: captured.update(block=output)
    )
    try:
        with torch.no_grad():
            out = model(input_ids=ids, output_hidden_states=True)
    finally:
        hook.remove()
    last = out.hidden_states[-1]
    assert len(out.hidden_states) == model.config.n_layer + 1
    block = captured["block"][0] if isinstance(captured["block"], tuple) else captured["block"]
    torch.testing.assert_close(last, model.transformer.ln_f(block), rtol=0, atol=1e-6)
    assert not torch.allclose(last, block, atol=1e-3)
    torch.testing.assert_close(model.lm_head(last), out.logits, rtol=0, atol=1e-5)


def test_save_pretrained_and_load_causal_lm_round_trip(model, tokenizer, tmp_path):
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded, loaded_tokenizer = load_causal_lm(str(tmp_path))
    text = "Return a new list of the values."
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    assert loaded_tokenizer(text)["input_ids"] == ids[0].tolist()
    assert loaded_tokenizer.pad_token_id == tokenizer.pad_token_id
    assert type(loaded) is type(model) and not loaded.training
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, model(ids).logits, rtol=0, atol=0)


def test_load_causal_lm_pads_with_eos_when_there_is_no_pad_token(model, tokenizer, tmp_path):
    model.save_pretrained(tmp_path / "model")
    no_pad = train_bpe_tokenizer(["Return the value."], vocab_size=300)
    no_pad.pad_token = None
    no_pad.save_pretrained(tmp_path / "tokenizer")
    _, loaded = load_causal_lm(str(tmp_path / "model"), str(tmp_path / "tokenizer"))
    assert loaded.pad_token == EOS_TOKEN
