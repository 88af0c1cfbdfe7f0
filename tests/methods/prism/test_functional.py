import copy
import warnings
import zlib

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
from lightning.pytorch.loggers import Logger
from sklearn.metrics import roc_auc_score, roc_curve

from lightning_info.core.logging import METRIC_NAME, metric_key
from lightning_info.core.options import AdamWOptions
from lightning_info.lm.fine_tuner import CausalLMFineTuner
from lightning_info.lm.tiny_lm import tiny_causal_lm, train_bpe_tokenizer
from lightning_info.methods.prism.auditor import (
    ATTACKS,
    PAPER_ATTACKS,
    FragmentAuditOptions,
    FragmentAuditor,
)
from lightning_info.methods.prism.callback import FragmentExtractionAudit
from lightning_info.methods.prism.fragments import (
    PROFILES,
    PROMPT_TEMPLATE,
    UNSEEN_FRAGMENTS,
    build_attack_set,
    fragment_prompt,
    record_texts,
    synthetic_records,
)
from lightning_info.methods.prism.functional import (
    attack_metrics,
    data_aware_scores,
    encode_prompt_fragment,
    fragment_log_probability,
    likelihood_ratio,
    posterior,
    prism_score,
    roc_auc,
    tpr_at_fpr,
    world_log_probability,
)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def records():
    return synthetic_records(40, seed=0)


@pytest.fixture(scope="module")
def frag_tokenizer(records):
    texts = [t for r in records for t in record_texts(r)] + list(UNSEEN_FRAGMENTS)
    return train_bpe_tokenizer(texts, vocab_size=400)


def _lm(tokenizer, seed):
    return tiny_causal_lm(tokenizer, n_layer=1, n_embd=16, n_head=2, n_positions=128, seed=seed)


# ------------------------------------------------------------------ formulas


def test_likelihood_ratio_and_posterior_follow_the_note():
    gen = torch.Generator().manual_seed(0)
    p_t, p_s = torch.rand(50, generator=gen, dtype=torch.float64), torch.rand(50, generator=gen)
    lr = likelihood_ratio(p_t, p_s)
    torch.testing.assert_close(lr, p_t / (p_s.double() + 1e-12))
    for pi in (0.1, 0.5, 0.9):
        naive = lr * pi / (lr * pi + (1 - pi) / lr)  # the note's formula, /LR included
        torch.testing.assert_close(posterior(lr, pi), naive, rtol=1e-12, atol=1e-15)
        torch.testing.assert_close(posterior(torch.ones(3), pi), torch.full((3,), pi).double())
    assert posterior([0.0, float("inf")], 0.9).tolist() == [0.0, 1.0]
    with pytest.raises(ValueError):
        posterior([1.0], 1.0)


def test_prism_score_formula_and_identities():
    gen = torch.Generator().manual_seed(1)
    p_t, p_s, p_w = (torch.rand(40, generator=gen, dtype=torch.float64) for _ in range(3))
    post = posterior(likelihood_ratio(p_t, p_s), 0.9)
    expected = (p_w - p_s * (1 - post)) / (post + 1e-12)
    torch.testing.assert_close(prism_score(p_t, p_s, p_w, 0.9), expected)
    # p_w = p_s  =>  PRISM = p_s
    torch.testing.assert_close(prism_score(p_t, p_s, p_s), p_s, rtol=1e-9, atol=0)
    # LR = 1 => post = pi => PRISM = (p_w - p_s (1 - pi)) / pi
    torch.testing.assert_close(
        prism_score(p_s, p_s, p_w, 0.9), (p_w - 0.1 * p_s) / 0.9, rtol=1e-6, atol=1e-9
    )
    with pytest.raises(ValueError, match="probabilities"):
        prism_score([1.5], [0.1], [0.1])


def test_world_log_probability_is_log_of_mean_probability():
    a, b = torch.tensor([-1.0, -800.0]), torch.tensor([-3.0, -801.0])
    out = world_log_probability([a, b])
    assert out[0].item() == pytest.approx(np.log((np.exp(-1) + np.exp(-3)) / 2))
    assert np.isfinite(out[1].item())  # no underflow


# ------------------------------------------------------------------ fragment probabilities


def _manual_log_prob(model, tokenizer, prompt, fragment):
    ids, start = encode_prompt_fragment(tokenizer, prompt, fragment)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0]
    log_probs = torch.log_softmax(logits.double(), -1)
    return sum(log_probs[t - 1, ids[t]].item() for t in range(start, len(ids)))


def test_encode_prompt_fragment_isolates_the_fragment(frag_tokenizer):
    prompt = fragment_prompt(["asthma", "gout"])
    ids, start = encode_prompt_fragment(frag_tokenizer, prompt, "type 2 diabetes")
    assert frag_tokenizer.decode(ids[start:]) == " type 2 diabetes"
    assert frag_tokenizer.decode(ids[:start]) == prompt.rstrip()
    ids, start = encode_prompt_fragment(frag_tokenizer, prompt, "gout", move_trailing_space=False)
    assert frag_tokenizer.decode(ids[:start]) == prompt
    with pytest.raises(ValueError, match="empty"):
        encode_prompt_fragment(frag_tokenizer, prompt, "  ")


def test_fragment_log_probability_matches_manual_forward(frag_tokenizer, records):
    model = _lm(frag_tokenizer, seed=0)
    attack = build_attack_set(records[:3], records[3:5], n_unseen=2, seed=0)
    prompts, fragments = attack.prompts, attack.fragments
    expected = torch.tensor(
        [_manual_log_prob(model, frag_tokenizer, p, f) for p, f in zip(prompts, fragments)],
        dtype=torch.float64,
    )
    for batch_size in (1, 3, 7):
        out = fragment_log_probability(model, frag_tokenizer, prompts, fragments, batch_size)
        assert out.dtype == torch.float64 and out.shape == (7,)
        torch.testing.assert_close(out, expected, rtol=0, atol=1e-4)
    left = copy.deepcopy(frag_tokenizer)
    left.padding_side = "left"
    out = fragment_log_probability(model, left, prompts, fragments, batch_size=4)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-4)
    assert (expected < 0).all()
    with pytest.raises(ValueError, match="pair up"):
        fragment_log_probability(model, frag_tokenizer, prompts, fragments[:-1])


# ------------------------------------------------------------------ metrics


def test_auc_and_interpolated_tpr_match_sklearn():
    rng = np.random.default_rng(0)
    for trial in range(5):
        labels = rng.integers(0, 2, 150)
        labels[:2] = (0, 1)
        scores = np.round(rng.normal(size=150) + labels * 0.8, 1 if trial % 2 else 6)  # ties
        fpr, tpr, _ = roc_curve(labels, scores)
        assert roc_auc(scores, labels) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
        for level in (0.0, 0.02, 0.05, 0.1, 1 / (labels == 0).sum(), 0.5, 1.0):
            expected = np.interp(level, fpr, tpr)
            assert tpr_at_fpr(scores, labels, level) == pytest.approx(expected, abs=1e-12)
    metrics = attack_metrics(scores, labels)
    assert set(metrics) == {"auc", "tpr@2%fpr", "tpr@5%fpr"}
    perfect = attack_metrics([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1])
    assert perfect == {"auc": 1.0, "tpr@2%fpr": 1.0, "tpr@5%fpr": 1.0}


def test_data_aware_scores_are_out_of_fold():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    labels = np.tile([0, 1], 30)
    features = rng.normal(size=(60, 3)) + labels[:, None]
    features[0, 1] = -np.inf  # an underflowed log-probability is tolerated
    scores, folds = data_aware_scores(features, labels, n_splits=5, seed=0, classifier="logistic")
    assert sorted(np.bincount(folds)) == [12] * 5
    for k in range(5):  # stratified
        assert labels[folds == k].sum() == 6
    # Each fold is scored by a model fitted on the other folds only.
    clean = features.copy()
    clean[0, 1] = features[np.isfinite(features[:, 1]), 1].min() - 1
    for k in range(5):
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
        model.fit(clean[folds != k], labels[folds != k])
        np.testing.assert_allclose(scores[folds == k], model.predict_proba(clean[folds == k])[:, 1])
    # Flipping one sample's label cannot change its own score, only other folds' scores.
    flipped = labels.copy()
    flipped[7] = 1 - flipped[7]
    again, _ = data_aware_scores(features, flipped, folds=folds, classifier="logistic")
    assert again[7] == scores[7]
    np.testing.assert_array_equal(again[folds == folds[7]], scores[folds == folds[7]])
    assert not np.allclose(again[folds != folds[7]], scores[folds != folds[7]])
    assert np.isfinite(features[1:]).all() and np.isneginf(features[0, 1])  # input untouched


def test_data_aware_boosted_trees_are_out_of_fold_and_see_only_the_order_of_each_feature():
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(1)
    labels = np.tile([0, 1], 40)
    logs = rng.normal(size=(80, 3)) + 0.8 * labels[:, None]
    scores, folds = data_aware_scores(logs, labels, n_splits=4, seed=3)
    for k in range(4):
        model = HistGradientBoostingClassifier(random_state=3)
        model.fit(logs[folds != k], labels[folds != k])
        np.testing.assert_allclose(scores[folds == k], model.predict_proba(logs[folds == k])[:, 1])
    # the reference feeds raw probabilities: trees bin each feature by its order, same model
    raw, _ = data_aware_scores(np.exp(logs), labels, folds=folds, seed=3)
    np.testing.assert_allclose(raw, scores, atol=1e-12)
    with pytest.raises(ValueError, match="classifier"):
        data_aware_scores(logs, labels, classifier="forest")


# ------------------------------------------------------------------ synthetic data


def test_synthetic_records_are_deterministic_and_correlated():
    records = synthetic_records(400, seed=3)
    assert records == synthetic_records(400, seed=3)
    assert records != synthetic_records(400, seed=4)
    vocabulary = {c for conditions in PROFILES.values() for c in conditions}
    for record in records:
        assert 5 <= len(record) <= 10 and len(set(record)) == len(record)
        assert set(record) <= vocabulary
    # Profile-mates co-occur more often than independence predicts.
    has = {c: np.array([c in r for r in records]) for c in ("hypertension", "type 2 diabetes")}
    joint = (has["hypertension"] & has["type 2 diabetes"]).mean()
    assert joint > 1.5 * has["hypertension"].mean() * has["type 2 diabetes"].mean()


def test_attack_set_labels_and_prompts(records):
    members, non_members = records[:20], records[20:32]
    attack = build_attack_set(members, non_members, n_unseen=8, seed=1)
    assert attack == build_attack_set(members, non_members, n_unseen=8, seed=1)
    assert len(attack) == 40 and sum(attack.labels) == 20
    assert attack.kinds.count("non_member") == 12 and attack.kinds.count("unseen") == 8
    head = PROMPT_TEMPLATE.split("{context}")[0]
    for prompt, fragment, label, kind, index in zip(
        attack.prompts, attack.fragments, attack.labels, attack.kinds, attack.records
    ):
        assert prompt.startswith(head) and prompt.endswith("includes: ")
        assert label == (kind == "member")
        context = prompt[len(head) :].split(". That")[0].split(", ")
        source = non_members[index] if kind == "non_member" else members[index]
        assert fragment not in context and set(context) < set(source)
        assert (fragment in source) == (kind != "unseen")
        assert (fragment in UNSEEN_FRAGMENTS) == (kind == "unseen")
    default = build_attack_set(members, non_members)
    assert default.kinds.count("unseen") == len(members)


# ------------------------------------------------------------------ audit


def test_end_to_end_audit_with_tiny_models(frag_tokenizer, records):
    attack = build_attack_set(records[:15], records[15:30], n_unseen=10, seed=0)
    worlds = [_lm(frag_tokenizer, seed=s) for s in (2, 3)]
    auditor = FragmentAuditor(
        _lm(frag_tokenizer, 0), _lm(frag_tokenizer, 1), worlds, frag_tokenizer
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untrained tiny models may trip the p_w > p_s warning
        report = auditor.run(attack)
    assert set(report.metrics) == set(ATTACKS)
    kinds = np.asarray(attack.kinds)
    labels = np.asarray(attack.labels)
    for name, metrics in report.metrics.items():
        assert set(metrics) == {
            "auc",
            "tpr@0.1%fpr",
            "tpr@1%fpr",
            "tpr@2%fpr",
            "tpr@5%fpr",
            "auc vs non-members",
            "auc vs unseen",
            "auc_se",
            "pr_auc",
            "tpr@0.1%fpr at most",
            "tpr@1%fpr at most",
            "tpr@2%fpr at most",
            "tpr@5%fpr at most",
            "beats_blind",
            "auc_se vs non-members",
            "auc_se vs unseen",
            "beats_blind vs non-members",
            "beats_blind vs unseen",
        }
        assert all(0.0 <= value <= 1.0 for value in metrics.values())
        for kind, key in (("non_member", "auc vs non-members"), ("unseen", "auc vs unseen")):
            keep = np.isin(kinds, ["member", kind])  # members against this kind alone
            expected = roc_auc_score(labels[keep], report.scores[name][keep])
            assert metrics[key] == pytest.approx(expected, abs=1e-12)
        fpr, tpr, _ = roc_curve(labels, report.scores[name])
        assert metrics["tpr@1%fpr"] == pytest.approx(np.interp(0.01, fpr, tpr), abs=1e-12)
    # The baseline attacks are the functional scores of the target's (and shadow's) tokens.
    tokens = auditor.token_statistics(attack)
    target = tokens["target"].log_probs
    lengths = np.array([len(t) for t in target])
    mean_target = report.log_probs["target"] / lengths
    np.testing.assert_allclose(report.scores["loss"], mean_target, atol=1e-12)
    mean_shadow = report.log_probs["shadow"] / lengths
    np.testing.assert_allclose(report.scores["reference"], mean_target - mean_shadow, atol=1e-12)
    sizes = [len(zlib.compress(f.encode("utf-8"))) for f in attack.fragments]
    np.testing.assert_allclose(report.scores["zlib"], mean_target / sizes, atol=1e-12)
    lowest = [np.sort(t.numpy())[: max(1, int(0.2 * len(t)))].mean() for t in target]
    np.testing.assert_allclose(report.scores["min_k"], lowest, atol=1e-12)
    assert len(tokens) == 4 and tokens["world 1"].means == []
    log_ratio = report.log_probs["world"] - report.log_probs["shadow"]
    seen = kinds != "unseen"
    negatives = float((labels == 0).sum())
    assert report.diagnostics == pytest.approx(
        {
            "share of queries with p_w > p_s": float((log_ratio > 0).mean()),
            "median log(p_w / p_s), seen fragments": float(np.median(log_ratio[seen])),
            "negatives": negatives,
            "negatives needed for tpr@0.1%fpr": 1000.0,
            "negatives needed for tpr@1%fpr": 100.0,
            "negatives needed for tpr@2%fpr": 50.0,
            "negatives needed for tpr@5%fpr": 20.0,
        }
    )
    assert all(len(s) == len(attack) for s in report.scores.values())
    # 14 figures per attack, the blind AUC and its s.e., 4 distribution-check figures
    assert len(report.scalars()) == 9 * 18 + 6 + 4 and "| data_aware" in str(report)
    assert "median log(p_w / p_s)" in str(report) and "| min_k++" in str(report)
    # Reusing cached log-probabilities gives the paper's attacks unchanged; with the cached
    # token statistics, the whole report.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        texts = {"fragments": attack.fragments, "prompts": attack.prompts}
        again = auditor.score(report.log_probs, attack.labels, attack.kinds, **texts)
        whole = auditor.score(report.log_probs, attack.labels, attack.kinds, tokens, **texts)
    assert again.metrics == {name: report.metrics[name] for name in PAPER_ATTACKS}
    assert whole.metrics == report.metrics
    with pytest.raises(ValueError, match="fragments"):
        auditor.score(report.log_probs, attack.labels, attack.kinds, tokens)


def test_a_world_model_above_the_shadow_on_seen_fragments_is_warned_about(frag_tokenizer, records):
    options = FragmentAuditOptions(n_splits=2)
    auditor = FragmentAuditor(None, None, [None], frag_tokenizer, options)  # cached values
    labels = [1, 1, 1, 0, 0, 0]
    kinds = ["member"] * 3 + ["non_member"] * 2 + ["unseen"]
    shadow = np.log([0.2, 0.1, 0.3, 0.2, 0.1, 0.001])
    target = np.log([0.5, 0.4, 0.6, 0.2, 0.1, 0.001])
    second_shadow = {"target": target, "shadow": shadow, "world": shadow + 0.5}
    with pytest.warns(UserWarning, match="external prior"):
        report = auditor.score(second_shadow, labels, kinds)
    assert report.diagnostics["median log(p_w / p_s), seen fragments"] == pytest.approx(0.5)
    assert report.diagnostics["share of queries with p_w > p_s"] == 1.0
    prior = {"target": target, "shadow": shadow, "world": shadow - 1.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning for an external prior below the shadow
        report = auditor.score(prior, labels, kinds)
    assert report.diagnostics["share of queries with p_w > p_s"] == 0.0


class _MemoryLogger(Logger):
    def __init__(self):
        super().__init__()
        self.metrics = {}

    name = "memory"
    version = 0

    def log_metrics(self, metrics, step=None):
        self.metrics.update(metrics)

    def log_hyperparams(self, params, *args, **kwargs):
        pass


def test_callback_audits_the_trained_model_at_fit_end(frag_tokenizer, records):
    members = records[:10]
    texts = [t for r in members for t in record_texts(r)][:16]
    enc = frag_tokenizer(texts, padding=True, return_tensors="pt")
    labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
    rows = [
        {"input_ids": i, "attention_mask": m, "labels": y}
        for i, m, y in zip(enc["input_ids"], enc["attention_mask"], labels)
    ]
    loader = torch.utils.data.DataLoader(rows, batch_size=8)
    attack = build_attack_set(members, records[10:20], n_unseen=5, seed=0)
    callback = FragmentExtractionAudit(
        attack, _lm(frag_tokenizer, 1), [_lm(frag_tokenizer, 2)], tokenizer=frag_tokenizer
    )
    logger = _MemoryLogger()
    trainer = pl.Trainer(
        max_steps=2,
        logger=logger,
        callbacks=[callback],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    trainer.fit(CausalLMFineTuner(_lm(frag_tokenizer, 0), optimizer=AdamWOptions(lr=1e-2)), loader)
    assert callback.report is not None
    for attack_name in ATTACKS:
        assert 0.0 <= logger.metrics[metric_key("prism", attack_name, "auc")] <= 1.0
        assert metric_key("prism", attack_name, "tpr@5%fpr") in logger.metrics
    # min_k++ and the percent levels, spelled out
    assert "prism/min_kplusplus/tpr_at_0.1pct_fpr" in logger.metrics
    assert all(METRIC_NAME.fullmatch(key) for key in logger.metrics)


def test_callback_checks_tokenizer_and_target_before_training(frag_tokenizer, records, tmp_path):
    attack = build_attack_set(records[:10], records[10:20], n_unseen=5, seed=0)
    path = attack.save(tmp_path / "attack.json")
    assert FragmentExtractionAudit(path, "shadow", ["world"]).attack_set == attack
    rows = [{"input_ids": torch.tensor([1, 2, 3]), "labels": torch.tensor([1, 2, 3])}]
    loader = torch.utils.data.DataLoader(rows, batch_size=1)
    too_small = _lm(frag_tokenizer, 0)
    too_small.resize_token_embeddings(len(frag_tokenizer) - 5)
    cases = [
        (None, _lm(frag_tokenizer, 0), ValueError, "needs a tokenizer"),
        (frag_tokenizer, too_small, ValueError, "does not belong to this model"),
    ]
    for tokenizer, target, error, message in cases:
        callback = FragmentExtractionAudit(attack, "shadow", ["world"], tokenizer=tokenizer)
        trainer = pl.Trainer(
            max_steps=1, callbacks=[callback], logger=False, default_root_dir=tmp_path
        )
        with pytest.raises(error, match=message):
            trainer.fit(CausalLMFineTuner(target, optimizer=AdamWOptions(lr=1e-2)), loader)
        assert trainer.global_step == 0
