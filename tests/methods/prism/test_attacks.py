import math
import zlib

import pytest
import torch

from lightning_info.lm.tiny_lm import tiny_causal_lm, train_bpe_tokenizer
from lightning_info.methods.prism.attacks import (
    loss_score,
    min_k_plus_plus_score,
    min_k_score,
    negatives_for_fpr,
    reference_ratio_score,
    zlib_score,
)
from lightning_info.methods.prism.fragments import (
    UNSEEN_FRAGMENTS,
    build_attack_set,
    record_texts,
    synthetic_records,
)
from lightning_info.methods.prism.functional import (
    encode_prompt_fragment,
    fragment_log_probability,
    fragment_token_statistics,
)

ROWS = [
    torch.tensor([-1.0, -5.0, -3.0, -2.0, -4.0]),
    torch.tensor([-0.5, -0.25]),
]


def test_loss_and_zlib_scores_by_hand():
    assert loss_score(ROWS).tolist() == [-3.0, -0.375]
    texts = ["aaaaaaaaaaaaaaaaaaaa", "a varied sentence, hard to compress"]
    sizes = [len(zlib.compress(t.encode("utf-8"))) for t in texts]
    assert sizes[0] < sizes[1]
    assert zlib_score(ROWS, texts).tolist() == [-3.0 / sizes[0], -0.375 / sizes[1]]
    with pytest.raises(ValueError, match="2 rows"):
        zlib_score(ROWS, texts[:1])


def test_min_k_keeps_the_lowest_fraction_and_at_least_one_token():
    # k = 0.4 of 5 tokens: the 2 lowest (-5, -4); of 2 tokens: floor(0.8) = 0 -> 1 token (-0.5).
    assert min_k_score(ROWS, k=0.4).tolist() == [-4.5, -0.5]
    assert min_k_score(ROWS, k=1.0).tolist() == loss_score(ROWS).tolist()
    assert min_k_score(ROWS, k=0.01).tolist() == [-5.0, -0.5]
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="fraction"):
            min_k_score(ROWS, k=bad)


def test_min_k_plus_plus_standardises_each_token_before_keeping_the_lowest():
    means = [torch.tensor([-2.0, -2.0, -2.0, -2.0, -2.0]), torch.tensor([-1.0, -1.0])]
    stds = [torch.tensor([1.0, 2.0, 0.5, 4.0, 1.0]), torch.tensor([0.5, 0.0])]
    # row 0: z = (1, -1.5, -2, 0, -2); row 1: z = (1, 0) (sigma = 0 carries no evidence).
    scores = min_k_plus_plus_score(ROWS, means, stds, k=0.4)
    assert scores.tolist() == [-2.0, 0.0]
    assert min_k_plus_plus_score(ROWS, means, stds, k=1.0).tolist() == [-0.9, 0.5]
    with pytest.raises(ValueError, match="tokens"):
        min_k_plus_plus_score(ROWS, [means[0], means[0]], stds)
    with pytest.raises(ValueError, match=">= 0"):
        min_k_plus_plus_score(ROWS, means, [-stds[0], stds[1]])


def test_reference_ratio_is_the_target_mean_minus_the_reference_mean():
    reference = [torch.tensor([-2.0, -2.0, -2.0, -2.0, -2.0]), torch.tensor([-1.0, -1.0])]
    assert reference_ratio_score(ROWS, reference).tolist() == [-1.0, 0.625]


def test_bad_token_rows_are_refused():
    with pytest.raises(ValueError, match="empty"):
        loss_score([])
    with pytest.raises(ValueError, match="non-empty 1-D"):
        loss_score([torch.zeros(0)])
    with pytest.raises(ValueError, match="non-empty 1-D"):
        loss_score([torch.zeros(2, 2)])
    with pytest.raises(ValueError, match="NaN"):
        loss_score([torch.tensor([float("nan")])])


def test_negatives_needed_for_a_false_positive_rate():
    assert negatives_for_fpr(0.01) == 100
    assert negatives_for_fpr(0.001) == 1000
    assert negatives_for_fpr(0.05) == 20
    with pytest.raises(ValueError, match="fpr_level"):
        negatives_for_fpr(0.0)


@pytest.fixture(scope="module")
def model_and_tokenizer():
    records = synthetic_records(12, seed=0)
    texts = [t for r in records for t in record_texts(r)] + list(UNSEEN_FRAGMENTS)
    tokenizer = train_bpe_tokenizer(texts, vocab_size=300)
    model = tiny_causal_lm(tokenizer, n_layer=1, n_embd=16, n_head=2, n_positions=256, seed=0)
    return model, tokenizer, build_attack_set(records[:3], records[3:5], n_unseen=2, seed=0)


def test_token_statistics_match_a_manual_forward_over_the_whole_vocabulary(model_and_tokenizer):
    model, tokenizer, attack = model_and_tokenizer
    tokens = fragment_token_statistics(model, tokenizer, attack.prompts, attack.fragments, 3)
    assert len(tokens.log_probs) == len(tokens.means) == len(tokens.stds) == len(attack.prompts)
    for i, (prompt, fragment) in enumerate(zip(attack.prompts, attack.fragments)):
        ids, start = encode_prompt_fragment(tokenizer, prompt, fragment)
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0].double()
        expected_lp, expected_mu, expected_sd = [], [], []
        for t in range(start, len(ids)):
            log_p = torch.log_softmax(logits[t - 1], -1)
            p = log_p.exp()
            mu = sum(p[z].item() * log_p[z].item() for z in range(len(p)))
            var = sum(p[z].item() * (log_p[z].item() - mu) ** 2 for z in range(len(p)))
            expected_lp.append(log_p[ids[t]].item())
            expected_mu.append(mu)
            expected_sd.append(math.sqrt(var))
        kw = {"rtol": 0, "atol": 1e-4, "check_dtype": False}
        torch.testing.assert_close(tokens.log_probs[i], torch.tensor(expected_lp), **kw)
        torch.testing.assert_close(tokens.means[i], torch.tensor(expected_mu), **kw)
        torch.testing.assert_close(tokens.stds[i], torch.tensor(expected_sd), **kw)
    sums = fragment_log_probability(model, tokenizer, attack.prompts, attack.fragments, 2)
    torch.testing.assert_close(sums, torch.stack([r.sum() for r in tokens.log_probs]))
