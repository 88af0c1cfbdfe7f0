"""Gradient norm, ReCaLL, DC-PDD and the neighbourhood comparison against hand computations of
their papers' definitions, on hand-made rows and on a tiny GPT-2 built offline."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from lightning_info.lm.tiny_lm import tiny_causal_lm, train_bpe_tokenizer
from lightning_info.methods.prism.attacks import (
    dc_pdd_score,
    neighbourhood_score,
    recall_score,
    token_frequencies,
)
from lightning_info.methods.prism.model_attacks import (
    NeighbourhoodUnavailable,
    gradnorm_scores,
    make_neighbours,
    recall_token_log_probs,
    text_token_log_probs,
)

TEXTS = [
    "the cat sat on the mat",
    "a dog ran in the park",
    "the bird sang a song",
    "rain fell on the town",
]
SHOTS = ["an owl slept all day", "fish swam in a lake"]


@pytest.fixture(scope="module")
def lm():
    tokenizer = train_bpe_tokenizer(TEXTS + SHOTS, vocab_size=300)
    model = tiny_causal_lm(tokenizer, n_layer=1, n_embd=16, n_head=2, n_positions=64, seed=0)
    return model, tokenizer


def _ids(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _log_probs_by_hand(model, ids, start):
    """log p(ids[t] | ids[:t]) for t >= start, from the model's logits on the whole row."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].double()
    return torch.tensor(
        [torch.log_softmax(logits[t - 1], -1)[ids[t]].item() for t in range(start, len(ids))],
        dtype=torch.float64,
    )


# --------------------------------------------------------------------------------------------
# Gradient norm
# --------------------------------------------------------------------------------------------


def _gradnorm_by_hand(model, ids, p):
    twin = copy.deepcopy(model)
    twin.zero_grad()
    # transformers' own causal-LM loss: the mean NLL of tokens 2..T given the ones before.
    twin(input_ids=torch.tensor([ids]), labels=torch.tensor([ids])).loss.backward()
    norms = []
    for param in twin.parameters():
        g = param.grad.double().flatten()
        norms.append({1.0: g.abs().sum(), 2.0: g.square().sum().sqrt(), math.inf: g.abs().max()}[p])
    return -torch.stack(norms).mean()


@pytest.mark.parametrize("p", [1.0, 2.0, math.inf])
def test_gradnorm_is_minus_the_mean_per_tensor_norm_of_the_loss_gradient(lm, p):
    model, tokenizer = lm
    rows = [_ids(tokenizer, text) for text in TEXTS[:2]]
    scores = gradnorm_scores(model, rows, norm=p)
    assert scores.dtype == torch.float64 and scores.shape == (2,)
    expected = torch.stack([_gradnorm_by_hand(model, ids, p) for ids in rows])
    torch.testing.assert_close(scores, expected, rtol=1e-5, atol=0)


def test_gradnorm_default_is_mimirs_infinity_norm(lm):
    model, tokenizer = lm
    rows = [_ids(tokenizer, TEXTS[0])]
    assert gradnorm_scores(model, rows).tolist() == gradnorm_scores(model, rows, math.inf).tolist()


def test_gradnorm_leaves_parameters_grads_and_mode_unchanged(lm):
    model, tokenizer = lm
    before = {k: v.clone() for k, v in model.state_dict().items()}
    first = next(model.parameters())
    first.grad = torch.full_like(first, 0.5)
    model.train()
    try:
        gradnorm_scores(model, [_ids(tokenizer, TEXTS[0])], norm=2.0)
        assert model.training
        torch.testing.assert_close(first.grad, torch.full_like(first, 0.5), rtol=0, atol=0)
        assert all(p.grad is None for p in list(model.parameters())[1:])
        for key, value in model.state_dict().items():
            assert torch.equal(value, before[key]), key
    finally:
        first.grad = None
        model.eval()


def test_gradnorm_uses_only_parameters_that_require_grad(lm):
    model, tokenizer = lm
    ids = _ids(tokenizer, TEXTS[1])
    twin = copy.deepcopy(model)
    twin.requires_grad_(False)
    wpe = twin.transformer.wpe.weight
    wpe.requires_grad_(True)
    score = gradnorm_scores(twin, [ids], norm=2.0)
    twin(input_ids=torch.tensor([ids]), labels=torch.tensor([ids])).loss.backward()
    torch.testing.assert_close(score, -wpe.grad.double().norm().reshape(1), rtol=1e-5, atol=0)


def test_gradnorm_bad_input(lm):
    model, tokenizer = lm
    ids = _ids(tokenizer, TEXTS[0])
    with pytest.raises(ValueError, match="empty"):
        gradnorm_scores(model, [])
    with pytest.raises(ValueError, match="one 1-D tensor"):
        gradnorm_scores(model, torch.tensor(ids))
    with pytest.raises(ValueError, match="at least 2"):
        gradnorm_scores(model, [ids[:1]])
    with pytest.raises(ValueError, match="indices in"):
        gradnorm_scores(model, [[0, len(tokenizer) + 5]])
    with pytest.raises(TypeError, match="integer"):
        gradnorm_scores(model, [torch.tensor([1.0, 2.0])])
    with pytest.raises(ValueError, match="`norm`"):
        gradnorm_scores(model, [ids], norm=3.0)
    frozen = copy.deepcopy(model).requires_grad_(False)
    with pytest.raises(ValueError, match="requires grad"):
        gradnorm_scores(frozen, [ids])


# --------------------------------------------------------------------------------------------
# ReCaLL
# --------------------------------------------------------------------------------------------


def test_recall_score_is_the_ratio_of_mean_log_likelihoods():
    plain = [torch.tensor([-1.0, -3.0]), torch.tensor([-2.0, -2.0, -2.0])]
    conditional = [torch.tensor([-3.0, -5.0]), torch.tensor([-1.0, -2.0, -3.0])]
    # text 0: LL(x|P) = -4, LL(x) = -2 -> 2; text 1: -2 / -2 -> 1.
    scores = recall_score(plain, conditional)
    assert scores.dtype == torch.float64
    assert scores.tolist() == [2.0, 1.0]


def test_recall_token_log_probs_match_the_logits_by_hand(lm):
    model, tokenizer = lm
    plain, conditional = recall_token_log_probs(model, tokenizer, TEXTS[:3], SHOTS, batch_size=2)
    prefix_ids = _ids(tokenizer, SHOTS[0] + "\n\n" + SHOTS[1] + "\n\n")
    expected_scores = []
    for i, text in enumerate(TEXTS[:3]):
        ids = _ids(tokenizer, text)
        alone = _log_probs_by_hand(model, [tokenizer.bos_token_id, *ids], 1)
        after = _log_probs_by_hand(model, prefix_ids + ids, len(prefix_ids))
        kw = {"rtol": 0, "atol": 1e-5}
        torch.testing.assert_close(plain[i], alone, **kw)
        torch.testing.assert_close(conditional[i], after, **kw)
        expected_scores.append(after.mean() / alone.mean())
    torch.testing.assert_close(
        recall_score(plain, conditional), torch.stack(expected_scores), rtol=1e-5, atol=0
    )


def test_recall_prefix_keeps_the_last_shots_that_fit(lm):
    _, tokenizer = lm
    short = tiny_causal_lm(tokenizer, n_layer=1, n_embd=16, n_head=2, n_positions=24, seed=0)
    shots = ["an owl slept all day long", "fish swam in a lake"]
    text = TEXTS[0]
    both = len(_ids(tokenizer, shots[0] + "\n\n" + shots[1] + "\n\n" + text))
    last = len(_ids(tokenizer, shots[1] + "\n\n")) + len(_ids(tokenizer, text))
    assert last <= 24 < both
    with pytest.warns(UserWarning, match="last 1 of 2"):
        _, conditional = recall_token_log_probs(short, tokenizer, [text], shots)
    prefix_ids = _ids(tokenizer, shots[1] + "\n\n")
    expected = _log_probs_by_hand(short, prefix_ids + _ids(tokenizer, text), len(prefix_ids))
    torch.testing.assert_close(conditional[0], expected, rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="Not even the last prefix text fits"):
        recall_token_log_probs(short, tokenizer, [text], ["a very long owl " * 8])


def test_recall_bad_input(lm):
    model, tokenizer = lm
    row = [torch.tensor([-1.0, -2.0])]
    with pytest.raises(ValueError, match="empty"):
        recall_score([], [])
    with pytest.raises(ValueError, match="NaN"):
        recall_score([torch.tensor([-1.0, float("nan")])], row)
    with pytest.raises(ValueError, match="tokens"):
        recall_score(row, [torch.tensor([-1.0])])
    with pytest.raises(ValueError, match="holds 1 texts"):
        recall_score(row, row * 2)
    with pytest.raises(ValueError, match="LL\\(x\\) = 0"):
        recall_score([torch.zeros(2)], row)
    with pytest.raises(ValueError, match="probability 0"):
        recall_score([torch.tensor([-1.0, -math.inf])], row)
    with pytest.raises(ValueError, match="<= 0|log-prob"):
        recall_score([torch.tensor([0.5, 0.2])], row)
    with pytest.raises(ValueError, match="prefix_texts"):
        recall_token_log_probs(model, tokenizer, TEXTS[:1], [])
    with pytest.raises(ValueError, match="`texts` is empty"):
        recall_token_log_probs(model, tokenizer, [], SHOTS)
    with pytest.raises(TypeError, match="sequence of strings"):
        recall_token_log_probs(model, tokenizer, TEXTS[0], SHOTS)


# --------------------------------------------------------------------------------------------
# DC-PDD
# --------------------------------------------------------------------------------------------


def test_token_frequencies_count_every_occurrence_with_laplace_smoothing():
    # 6 tokens over a vocabulary of 4: token 1 three times (twice in one text), 0 twice, 3 once.
    freq = token_frequencies([[1, 1, 0], [0, 1, 3]], vocab_size=4)
    assert freq.dtype == torch.float64
    torch.testing.assert_close(freq, torch.tensor([3.0, 4.0, 1.0, 2.0], dtype=torch.float64) / 10)
    assert freq.sum().item() == pytest.approx(1.0)


def test_dc_pdd_scores_first_occurrences_with_the_clip_by_hand():
    freq = torch.tensor([0.5, 0.25, 0.125, 0.125], dtype=torch.float64)
    ids = [[1, 2, 1, 0], [3, 3]]
    probs = [[0.02, 0.001, 0.9, 0.004], [0.002, 0.5]]
    log_probs = [torch.tensor(p, dtype=torch.float64).log() for p in probs]
    # text 0: first occurrences at 0 (token 1), 1 (token 2), 3 (token 0); position 2 repeats 1.
    alphas = [0.02 * math.log(4), 0.001 * math.log(8), 0.004 * math.log(2)]
    clipped = [min(alpha, 0.01) for alpha in alphas]  # 0.0277 is clipped to 0.01
    assert clipped[0] == 0.01 and clipped[1:] == alphas[1:]
    expected_0 = sum(clipped) / 3
    expected_1 = min(0.002 * math.log(8), 0.01)  # token 3 counted once, at its first position
    scores = dc_pdd_score(ids, log_probs, freq, a=0.01)
    assert scores.dtype == torch.float64
    torch.testing.assert_close(
        scores, torch.tensor([expected_0, expected_1], dtype=torch.float64), rtol=1e-12, atol=0
    )
    loose = dc_pdd_score(ids, log_probs, freq, a=10.0)
    assert loose[0].item() == pytest.approx(sum(alphas) / 3, rel=1e-12)


def test_dc_pdd_on_a_tiny_gpt2_matches_the_definition_by_hand(lm):
    model, tokenizer = lm
    reference = [_ids(tokenizer, text) for text in SHOTS + TEXTS[2:]]
    freq = token_frequencies(reference, len(tokenizer))
    texts = TEXTS[:2]
    log_probs = text_token_log_probs(model, tokenizer, texts)
    ids = [_ids(tokenizer, text) for text in texts]
    scores = dc_pdd_score(ids, log_probs, freq, a=0.01)
    counts = [0] * len(tokenizer)
    for row in reference:
        for token in row:
            counts[token] += 1
    total = sum(counts)
    for i, row in enumerate(ids):
        by_hand = _log_probs_by_hand(model, [tokenizer.bos_token_id, *row], 1)
        seen, alphas = set(), []
        for t, token in enumerate(row):
            if token in seen:
                continue
            seen.add(token)
            f = (counts[token] + 1) / (total + len(tokenizer))
            alphas.append(min(math.exp(by_hand[t].item()) * math.log(1 / f), 0.01))
        assert scores[i].item() == pytest.approx(sum(alphas) / len(alphas), rel=1e-4)


def test_dc_pdd_bad_input():
    freq = torch.full((4,), 0.25, dtype=torch.float64)
    ids, rows = [[0, 1]], [torch.tensor([-1.0, -2.0])]
    for a in (0.0, -0.01):
        with pytest.raises(ValueError, match="`a`"):
            dc_pdd_score(ids, rows, freq, a=a)
    with pytest.raises(ValueError, match="`a`"):
        dc_pdd_score(ids, rows, freq, a=float("nan"))
    with pytest.raises(ValueError, match="empty"):
        dc_pdd_score([], [], freq)
    with pytest.raises(ValueError, match="NaN"):
        dc_pdd_score(ids, [torch.tensor([-1.0, float("nan")])], freq)
    with pytest.raises(ValueError, match="has 3 tokens but `log_probs` has 2"):
        dc_pdd_score([[0, 1, 2]], rows, freq)
    with pytest.raises(ValueError, match="holds 2 texts"):
        dc_pdd_score(ids * 2, rows, freq)
    with pytest.raises(ValueError, match="indices in"):
        dc_pdd_score([[0, 7]], rows, freq)
    with pytest.raises(ValueError, match="Laplace"):
        dc_pdd_score(ids, rows, torch.tensor([0.5, 0.5, 0.0, 0.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="token_frequencies"):
        dc_pdd_score(ids, rows, torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="<= 0|log-prob"):
        dc_pdd_score(ids, [torch.tensor([0.3, 0.2])], freq)
    with pytest.raises(ValueError, match="empty"):
        token_frequencies([], vocab_size=4)
    with pytest.raises(ValueError, match="vocab_size"):
        token_frequencies([[0]], vocab_size=0)
    with pytest.raises(ValueError, match="indices in"):
        token_frequencies([[0, 4]], vocab_size=4)


# --------------------------------------------------------------------------------------------
# Neighbourhood comparison
# --------------------------------------------------------------------------------------------


def _filler(masked):
    """A deterministic mask filler: the same two words for every masked position."""
    assert masked.count("<mask>") == 1
    return ["cat", "Dog"]


def test_make_neighbours_swaps_one_word_by_rank_then_seeded_position():
    text = "the dog runs"
    rank_0 = {"cat dog runs", "the cat runs", "the dog cat"}
    rank_1 = {"Dog dog runs", "the dog Dog"}  # "dog" -> "Dog" is the same word: skipped
    [three] = make_neighbours([text], _filler, n=3, seed=0)
    assert set(three) == rank_0
    [five] = make_neighbours([text], _filler, n=5, seed=0)
    assert set(five[:3]) == rank_0 and set(five[3:]) == rank_1
    orders = {tuple(make_neighbours([text], _filler, n=3, seed=s)[0]) for s in range(6)}
    assert len(orders) > 1
    assert make_neighbours([text], _filler, n=3, seed=4) == make_neighbours(
        [text], _filler, n=3, seed=4
    )
    [first] = make_neighbours([text], _filler, n=1, seed=0)
    assert len(first) == 1 and first[0] in rank_0


def test_make_neighbours_calls_a_fill_mask_pipeline_with_its_mask_token():
    calls = []

    class Pipeline:
        task = "fill-mask"
        tokenizer = type("Tok", (), {"mask_token": "[MASK]"})()

        def __call__(self, masked, top_k):
            calls.append((masked, top_k))
            return [{"token_str": " big", "score": 0.6}, {"token_str": " red", "score": 0.3}]

    [neighbours] = make_neighbours(["a box"], Pipeline(), n=4, top_k=2)
    assert calls == [("[MASK] box", 2), ("a [MASK]", 2)]
    assert set(neighbours[:2]) == {"big box", "a big"}
    assert set(neighbours[2:]) == {"red box", "a red"}


def test_neighbourhood_score_on_a_tiny_gpt2_by_hand(lm):
    model, tokenizer = lm
    text = TEXTS[0]
    [neighbours] = make_neighbours([text], _filler, n=3, seed=0)

    def loss_by_hand(t):
        return -_log_probs_by_hand(model, [tokenizer.bos_token_id, *_ids(tokenizer, t)], 1).mean()

    rows = text_token_log_probs(model, tokenizer, [text, *neighbours])
    losses = torch.stack([-row.mean() for row in rows])
    expected = torch.stack([loss_by_hand(t) for t in neighbours]).mean() - loss_by_hand(text)
    score = neighbourhood_score(losses[:1], [losses[1:]])
    assert score.dtype == torch.float64
    torch.testing.assert_close(score, expected.reshape(1), rtol=0, atol=1e-5)
    two = neighbourhood_score(torch.tensor([1.0, 2.0]), torch.tensor([[2.0, 4.0], [1.0, 2.0]]))
    assert two.tolist() == [2.0, -0.5]


def test_neighbourhood_without_a_mask_filler_raises_the_documented_exception():
    with pytest.raises(NeighbourhoodUnavailable, match="needs a mask filler.*skip this attack"):
        make_neighbours(["a text"])
    assert issubclass(NeighbourhoodUnavailable, RuntimeError)


def test_neighbourhood_bad_input():
    for n in (0, -1):
        with pytest.raises(ValueError, match="`n`"):
            make_neighbours(["a b"], _filler, n=n)
    with pytest.raises(TypeError, match="`n`"):
        make_neighbours(["a b"], _filler, n=2.5)
    with pytest.raises(ValueError, match="`texts` is empty"):
        make_neighbours([], _filler)
    with pytest.raises(ValueError, match="no word"):
        make_neighbours(["   "], _filler)
    with pytest.raises(TypeError, match="list of words"):
        make_neighbours(["a b"], lambda masked: "cat")
    with pytest.raises(TypeError, match="callable"):
        make_neighbours(["a b"], "roberta-base")
    with pytest.raises(ValueError, match="no replacement"):
        make_neighbours(["cat"], lambda masked: ["cat"])
    with pytest.warns(UserWarning, match="fewer than n=5"):
        make_neighbours(["a b"], _filler, n=5)
    with pytest.raises(ValueError, match="empty"):
        neighbourhood_score([], [])
    with pytest.raises(ValueError, match="NaN"):
        neighbourhood_score([float("nan")], [torch.tensor([1.0])])
    with pytest.raises(ValueError, match="NaN"):
        neighbourhood_score([1.0], [torch.tensor([1.0, float("nan")])])
    with pytest.raises(ValueError, match="holds 2 texts"):
        neighbourhood_score([1.0, 2.0], [torch.tensor([1.0])])
    with pytest.raises(ValueError, match="non-empty 1-D"):
        neighbourhood_score([1.0], [torch.tensor([])])
    with pytest.raises(ValueError, match="-loss_score"):
        neighbourhood_score([-1.0], [torch.tensor([1.0])])
