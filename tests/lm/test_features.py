import copy

import pytest
import torch

from lightning_info.core.blocks import TokenBlocks
from lightning_info.lm.corpus import instruction_dataset
from lightning_info.lm.features import pooled_features, response_features, tokenize_prompt_response
from lightning_info.lm.tiny_lm import tiny_causal_lm, train_bpe_tokenizer
from tests.conftest import CHAT_TEMPLATE

ATOL = 1e-5


@pytest.fixture
def chat_tokenizer(tokenizer):
    chat = copy.deepcopy(tokenizer)
    chat.chat_template = CHAT_TEMPLATE
    return chat


def _features(model, tokenizer, dataset, **kwargs):
    return response_features(model, tokenizer, dataset, progress=False, **kwargs)


def _manual_blocks(model, tokenizer, dataset, **kwargs):
    """The oracle: one unpadded forward pass per row, rows picked by its own response mask."""
    blocks = []
    for prompt, response in zip(dataset["prompt"], dataset["response"]):
        enc = tokenize_prompt_response(tokenizer, [prompt], [response], **kwargs)
        with torch.no_grad():
            out = model(input_ids=enc["input_ids"], output_hidden_states=True)
        blocks.append(out.hidden_states[-1][0][enc["response_mask"][0].bool()])
    return blocks


def _assert_blocks_equal(blocks, expected):
    assert isinstance(blocks, TokenBlocks)
    assert len(blocks) == len(expected)
    for i, block in enumerate(expected):
        torch.testing.assert_close(blocks.block(i), block, rtol=0, atol=ATOL)


def test_response_mask_marks_exactly_the_response_and_eos(tokenizer, dataset):
    prompts, responses = list(dataset["prompt"]), list(dataset["response"])
    enc = tokenize_prompt_response(tokenizer, prompts, responses, max_length=256)
    assert set(enc) == {"input_ids", "attention_mask", "response_mask"}
    for i, (prompt, response) in enumerate(zip(prompts, responses)):
        ids, real = enc["input_ids"][i], enc["attention_mask"][i].bool()
        mask = enc["response_mask"][i].bool()
        assert not (mask & ~real).any()
        assert tokenizer.decode(ids[mask]) == response + tokenizer.eos_token
        assert tokenizer.decode(ids[real & ~mask]) == prompt + "\n"
        assert ids[real][-1] == tokenizer.eos_token_id
        positions = torch.nonzero(mask).flatten()
        assert torch.equal(positions, torch.arange(positions[0], positions[-1] + 1))


def test_truncation_cuts_the_response_end_and_never_the_whole_response(tokenizer, dataset):
    prompt, response = dataset[0]["prompt"], dataset[0]["response"]
    prompt_tokens = len(tokenizer(prompt + "\n")["input_ids"])
    enc = tokenize_prompt_response(tokenizer, [prompt], [response], max_length=prompt_tokens + 3)
    assert enc["input_ids"].shape == (1, prompt_tokens + 3)
    assert enc["response_mask"].sum() == 3
    kept = tokenizer.decode(enc["input_ids"][0][enc["response_mask"][0].bool()])
    assert response.startswith(kept)
    with pytest.raises(ValueError, match="Row 1: the prompt takes"):
        tokenize_prompt_response(
            tokenizer, ["a", prompt], ["b", response], max_length=prompt_tokens
        )


def test_chat_template_locates_the_assistant_turn(chat_tokenizer, dataset):
    prompts, responses = list(dataset["prompt"]), list(dataset["response"])
    enc = tokenize_prompt_response(chat_tokenizer, prompts, responses, chat_template=True)
    for i, (prompt, response) in enumerate(zip(prompts, responses)):
        conversation = [
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": response},
        ]
        rendered = chat_tokenizer.apply_chat_template(conversation, tokenize=False)
        assert rendered == f"user:\n{prompt}\nassistant:\n{response}<|eos|>\n"
        expected = chat_tokenizer(rendered, add_special_tokens=False)["input_ids"]
        real, mask = enc["attention_mask"][i].bool(), enc["response_mask"][i].bool()
        assert enc["input_ids"][i][real].tolist() == expected
        assert chat_tokenizer.decode(enc["input_ids"][i][mask]) == response + "<|eos|>"


def test_chat_template_must_render_the_prompt_as_a_prefix(chat_tokenizer):
    chat_tokenizer.chat_template = (
        "{% for m in messages %}{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}>>{% endif %}"
    )
    with pytest.raises(ValueError, match="Row 0: the chat template"):
        tokenize_prompt_response(chat_tokenizer, ["Hi."], ["Hello."], chat_template=True)


def test_features_equal_an_unpadded_forward_pass(model, tokenizer, dataset):
    blocks = _features(model, tokenizer, dataset, batch_size=4)
    _assert_blocks_equal(blocks, _manual_blocks(model, tokenizer, dataset))
    assert blocks.values.dtype == torch.float32 and blocks.values.device.type == "cpu"
    assert blocks.dim == model.config.n_embd
    enc = tokenize_prompt_response(tokenizer, dataset["prompt"], dataset["response"])
    assert blocks.lengths.tolist() == enc["response_mask"].sum(1).tolist()


def test_chat_template_features_equal_an_unpadded_forward_pass(model, chat_tokenizer, dataset):
    blocks = _features(model, chat_tokenizer, dataset, batch_size=5, chat_template=True)
    expected = _manual_blocks(model, chat_tokenizer, dataset, chat_template=True)
    _assert_blocks_equal(blocks, expected)


def test_truncated_features_equal_an_unpadded_forward_pass(model, tokenizer, dataset):
    blocks = _features(model, tokenizer, dataset, batch_size=3, max_length=40)
    _assert_blocks_equal(blocks, _manual_blocks(model, tokenizer, dataset, max_length=40))


def test_batch_size_and_padding_side_do_not_change_the_features(model, tokenizer, dataset):
    one = _features(model, tokenizer, dataset, batch_size=1)
    seven = _features(model, tokenizer, dataset, batch_size=7)
    left_tokenizer = copy.deepcopy(tokenizer)
    left_tokenizer.padding_side = "left"
    left = _features(model, left_tokenizer, dataset, batch_size=7)
    enc = tokenize_prompt_response(left_tokenizer, dataset["prompt"], dataset["response"])
    assert (enc["attention_mask"][:, 0] == 0).any() and (enc["attention_mask"][:, -1] == 1).all()
    for other in (seven, left):
        assert torch.equal(other.offsets, one.offsets)
        torch.testing.assert_close(other.values, one.values, rtol=0, atol=ATOL)


def test_mapping_input_and_custom_columns(model, tokenizer, dataset):
    mapping = {"q": list(dataset["prompt"]), "a": list(dataset["response"])}
    blocks = _features(model, tokenizer, mapping, prompt_column="q", response_column="a")
    torch.testing.assert_close(blocks.values, _features(model, tokenizer, dataset).values)


def test_progress_bar_and_training_mode(model, tokenizer, dataset, capsys):
    model.train()
    try:
        _ = response_features(model, tokenizer, dataset.select(range(2)), progress=True)
        assert model.training
    finally:
        model.eval()
    assert "response features" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing.*:FutureWarning")
def test_peft_model_at_init_gives_the_base_features(tokenizer, dataset):
    peft = pytest.importorskip("peft")
    model = tiny_causal_lm(tokenizer, n_layer=2, n_embd=32, n_head=4, seed=1)
    base = _features(model, tokenizer, dataset, batch_size=4)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"], fan_in_fan_out=True)
    wrapped = peft.get_peft_model(model, config)
    _assert_blocks_equal(_features(wrapped, tokenizer, dataset, batch_size=4), base.to_list())
    with torch.no_grad():
        for name, parameter in wrapped.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.5, generator=torch.Generator().manual_seed(0))
    tuned = _features(wrapped, tokenizer, dataset, batch_size=4)
    assert (tuned.values - base.values).abs().max() > 1e-3


def test_pooled_features(model, tokenizer, dataset):
    blocks = _features(model, tokenizer, dataset)
    means, sums = pooled_features(blocks), pooled_features(blocks, "sum")
    assert means.shape == sums.shape == (len(blocks), blocks.dim)
    for i, block in enumerate(blocks.to_list()):
        torch.testing.assert_close(sums[i], block.sum(0))
        torch.testing.assert_close(means[i], block.mean(0))
    empty = TokenBlocks(torch.ones(2, 3), torch.tensor([0, 2, 2]))
    torch.testing.assert_close(pooled_features(empty, "sum"), torch.tensor([[2.0] * 3, [0.0] * 3]))
    with pytest.raises(ValueError, match=r"blocks \[1\] are empty"):
        pooled_features(empty)
    with pytest.raises(ValueError, match="pooling"):
        pooled_features(blocks, "max")


def test_rejects_models_that_are_not_causal_lms(tokenizer, dataset):
    transformers = pytest.importorskip("transformers")
    small = dict(hidden_size=16, num_attention_heads=2, intermediate_size=32)
    bert = transformers.BertModel(
        transformers.BertConfig(vocab_size=len(tokenizer), num_hidden_layers=1, **small)
    )
    with pytest.raises(ValueError, match="BertModel is not a causal language model"):
        _features(bert, tokenizer, dataset)
    t5 = transformers.T5ForConditionalGeneration(
        transformers.T5Config(
            vocab_size=len(tokenizer), d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2
        )
    )
    with pytest.raises(ValueError, match="encoder-decoder"):
        _features(t5, tokenizer, dataset)
    with pytest.raises(TypeError, match="causal language model"):
        _features(torch.nn.Linear(2, 2), tokenizer, dataset)


def test_rejects_a_tokenizer_larger_than_the_embedding(tokenizer, dataset):
    small = tiny_causal_lm(train_bpe_tokenizer(["Return the value."], vocab_size=300), n_embd=8)
    with pytest.raises(ValueError, match="600 tokens but the model's input embedding has only"):
        _features(small, tokenizer, dataset)


def test_data_errors(model, tokenizer, dataset):
    with pytest.raises(
        ValueError, match=r"\['answer'\] not found.*\['prompt', 'response', 'name'\]"
    ):
        _features(model, tokenizer, dataset, response_column="answer")
    with pytest.raises(ValueError, match="empty"):
        _features(model, tokenizer, {"prompt": [], "response": []})
    rows = instruction_dataset([("a.b", "Some text."), ("a.c", "  \n"), ("a.d", "More.")])
    with pytest.raises(ValueError, match="Row 1: the response is empty"):
        _features(model, tokenizer, rows)
    with pytest.raises(ValueError, match="batch_size"):
        _features(model, tokenizer, dataset, batch_size=0)


def test_curvature_weights_are_p_one_minus_p_of_the_full_models_prediction(
    model, tokenizer, dataset
):
    features, weights = _features(model, tokenizer, dataset, curvature_weights=True)
    assert weights.shape == (features.values.shape[0],) and weights.dtype == torch.float32
    # oracle: the full causal LM's logits (through lm_head), one unpadded row at a time
    expected = []
    for prompt, response in zip(dataset["prompt"], dataset["response"]):
        enc = tokenize_prompt_response(tokenizer, [prompt], [response])
        with torch.no_grad():
            logits = model(input_ids=enc["input_ids"]).logits[0]
        top = torch.softmax(logits[enc["response_mask"][0].bool()], -1).amax(-1)
        expected.append(top * (1 - top))
    torch.testing.assert_close(weights, torch.cat(expected), rtol=0, atol=ATOL)
    assert ((weights >= 0) & (weights <= 0.25)).all()
    # the features themselves are those returned without weights
    torch.testing.assert_close(features.values, _features(model, tokenizer, dataset).values)
