"""The PRISM audit report's statistics, blind baseline and extra attacks, each against the
functions that define them called directly on the report's own scores or on a tiny GPT-2."""

from __future__ import annotations

import json
import math
import warnings

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
from lightning.pytorch.loggers import Logger

from lightning_info.core.logging import METRIC_NAME, metric_key
from lightning_info.core.options import AdamWOptions
from lightning_info.lm.fine_tuner import CausalLMFineTuner
from lightning_info.lm.tiny_lm import tiny_causal_lm, train_bpe_tokenizer
from lightning_info.methods.prism.attacks import (
    dc_pdd_score,
    neighbourhood_score,
    recall_score,
    token_frequencies,
)
from lightning_info.methods.prism.auditor import (
    NEIGHBOURS,
    RECALL_SHOTS,
    FragmentAuditOptions,
    FragmentAuditor,
    extra_attack_scores,
)
from lightning_info.methods.prism.blind import (
    beats_blind,
    blind_baseline_auc,
    distribution_check,
)
from lightning_info.methods.prism.callback import FragmentExtractionAudit
from lightning_info.methods.prism.fragments import AttackSet
from lightning_info.methods.prism.functional import (
    encode_prompt_fragment,
    fragment_token_statistics,
    min_k_plus_plus_score,
    min_k_score,
)
from lightning_info.methods.prism.model_attacks import (
    gradnorm_scores,
    make_neighbours,
    recall_token_log_probs,
    text_token_log_probs,
)
from lightning_info.methods.prism.statistics import (
    bootstrap_auc,
    format_rate,
    membership_report,
    mimir_layout,
    pr_auc,
    tpr_at_fpr_levels,
)

COLOURS = ["red", "blue", "green", "amber", "violet", "white", "black", "grey", "pink", "teal"]
LEVELS = (0.001, 0.01, 0.02, 0.05)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _queries(first: int, count: int) -> tuple[list[str], list[str]]:
    prompts = [f"Box {i}: " for i in range(first, first + count)]
    fragments = [
        f"{COLOURS[i % 10]} sand and {i * 37 % 101} stones" for i in range(first, first + count)
    ]
    return prompts, fragments


def _attack_set(members: int, non_members: int) -> AttackSet:
    prompts, fragments = _queries(0, members + non_members)
    kinds = ["member"] * members + ["non_member"] * non_members
    return AttackSet(prompts, fragments, [int(k == "member") for k in kinds], kinds)


def _cached(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Made-up log-probabilities of target, shadow and world (the paper's attacks only)."""
    rng = np.random.default_rng(seed)
    shadow = -rng.uniform(1.0, 5.0, n)
    target = np.minimum(shadow + rng.normal(0.0, 1.0, n), -1e-3)
    return {"target": target, "shadow": shadow, "world": shadow - 1.0}


def _texts(attack: AttackSet, label: int) -> list[str]:
    return [p + f for p, f, y in zip(attack.prompts, attack.fragments, attack.labels) if y == label]


def _score(attack: AttackSet, options: FragmentAuditOptions, seed: int = 0):
    auditor = FragmentAuditor(None, None, [None], object(), options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # made-up worlds may trip the p_w > p_s warning
        return auditor.score(
            _cached(len(attack), seed),
            attack.labels,
            attack.kinds,
            fragments=attack.fragments,
            prompts=attack.prompts,
        )


# -------------------------------------------------------------- statistics of the report


def test_the_new_keys_equal_the_statistics_functions_on_the_report_s_own_scores():
    attack = _attack_set(12, 14)
    options = FragmentAuditOptions(n_splits=2, seed=3, bootstrap_resamples=200)
    report = _score(attack, options)
    y = np.asarray(attack.labels)
    for name, scores in report.scores.items():
        metrics = report.metrics[name]
        assert metrics["auc_se"] == bootstrap_auc(scores, y, 200, 3)[1]
        assert metrics["pr_auc"] == pr_auc(scores, y)
        rates = tpr_at_fpr_levels(scores, y, LEVELS)
        for level in LEVELS:
            assert metrics[f"tpr@{100 * level:g}%fpr at most"] == rates[level]["at_most"]
            # today's key is the interpolated convention, unchanged
            assert metrics[f"tpr@{100 * level:g}%fpr"] == pytest.approx(
                rates[level]["interpolated"], abs=1e-12
            )
        expected_row = membership_report({name: scores}, y, LEVELS, 200, 3)[name]
        assert report.statistics[name] == expected_row
        assert isinstance(report.statistics[name]["members"], int)
    assert report.mimir() == mimir_layout(membership_report(report.scores, y, LEVELS, 200, 3))
    scalars = report.scalars()
    assert scalars["prism/target/auc_se"] == report.metrics["target"]["auc_se"]
    assert "prism/min_kplusplus/tpr_at_1pct_fpr_at_most" not in scalars  # no token statistics
    assert scalars["prism/blind/auc"] == report.blind["auc"]
    assert all(METRIC_NAME.fullmatch(key) for key in scalars)


def test_beats_blind_flags_follow_the_rule_by_hand():
    attack = _attack_set(12, 14)
    options = FragmentAuditOptions(n_splits=2, bootstrap_resamples=200)
    report = _score(attack, options)
    members, negatives = _texts(attack, 1), _texts(attack, 0)
    overall = {key: report.blind[key] for key in ("auc", "auc_se", "folds")}
    assert overall == blind_baseline_auc(members, negatives, folds=2, seed=0)
    check = distribution_check(members, negatives, seed=0, folds=2)
    assert report.distribution == {
        key: check[key] for key in ("overlap_7", "overlap_13", "length_u", "length_p_value")
    }
    for name, metrics in report.metrics.items():
        by_hand = metrics["auc"] - report.blind["auc"] > metrics["auc_se"]
        assert metrics["beats_blind"] == float(by_hand), name
        assert metrics["beats_blind"] == float(
            beats_blind(metrics["auc"], metrics["auc_se"], report.blind["auc"])
        )


def _three_kind_attack_set(members: int, non_members: int, unseen: int) -> AttackSet:
    """Members and non-members alike in text; the unseen queries' fragments are another
    vocabulary, which the blind classifier tells apart from the members."""
    prompts, fragments = _queries(0, members + non_members)
    prompts += [f"Box {i}: " for i in range(unseen)]
    fragments += [f"quartz lattice {i} of obsidian" for i in range(unseen)]
    kinds = ["member"] * members + ["non_member"] * non_members + ["unseen"] * unseen
    return AttackSet(prompts, fragments, [int(k == "member") for k in kinds], kinds)


def test_the_blind_baseline_and_beats_blind_per_kind_of_negative_follow_the_split_by_hand():
    from lightning_info.measures.ranking import binary_auroc
    from lightning_info.methods.prism.blind import BOOTSTRAP_RESAMPLES, blind_baseline_scores

    attack = _three_kind_attack_set(20, 20, 20)
    options = FragmentAuditOptions(n_splits=2, seed=1, bootstrap_resamples=300)
    report = _score(attack, options)
    y, kinds = np.asarray(attack.labels), np.asarray(attack.kinds)
    members, negatives = _texts(attack, 1), _texts(attack, 0)
    blind_scores = np.empty(y.size)  # the classifier fitted once, on every negative
    blind_scores[y == 1] = blind_baseline_scores(members, negatives, 2, 1)[: len(members)]
    blind_scores[y == 0] = blind_baseline_scores(members, negatives, 2, 1)[len(members) :]
    for kind, split in (("non_member", " vs non-members"), ("unseen", " vs unseen")):
        keep = (kinds == "member") | (kinds == kind)
        blind_auc = float(binary_auroc(blind_scores[keep], y[keep]))
        assert report.blind["auc" + split] == pytest.approx(blind_auc, abs=1e-12)
        expected_se = bootstrap_auc(blind_scores[keep], y[keep], BOOTSTRAP_RESAMPLES, 1)[1]
        assert report.blind["auc_se" + split] == expected_se
        for name, scores in report.scores.items():
            metrics = report.metrics[name]
            se = bootstrap_auc(scores[keep], y[keep], 300, 1)[1]
            assert metrics["auc_se" + split] == se, name
            by_hand = metrics["auc" + split] - report.blind["auc" + split] > se
            assert metrics["beats_blind" + split] == float(by_hand), name
    # the unseen fragments' words give them away; the non-members' are the members' words
    assert report.blind["auc vs unseen"] > 0.95 > report.blind["auc vs non-members"]
    scalars = report.scalars()
    assert scalars["prism/blind/auc_vs_unseen"] == report.blind["auc vs unseen"]
    assert scalars["prism/blind/auc_se_vs_non-members"] == report.blind["auc_se vs non-members"]
    assert scalars["prism/target/beats_blind_vs_unseen"] == 0.0  # made-up scores cannot beat ~1
    columns, rows = report.table()
    blind_row = dict(zip(columns, rows[-1]))
    assert blind_row["auc vs unseen"] == round(report.blind["auc vs unseen"], 4)
    loss_row = dict(zip(columns, next(row for row in rows if row[0] == "target")))
    assert loss_row["beats_blind vs unseen"] == "no"


def test_without_kinds_no_per_kind_blind_figure_is_reported():
    attack = _three_kind_attack_set(10, 10, 10)
    auditor = FragmentAuditor(None, None, [None], object(), FragmentAuditOptions(n_splits=2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = auditor.score(
            _cached(len(attack)), attack.labels, fragments=attack.fragments, prompts=attack.prompts
        )
    assert set(report.blind) == {"auc", "auc_se", "folds"}
    assert not any(" vs " in key for metrics in report.metrics.values() for key in metrics)


def test_a_tpr_whose_level_needs_more_negatives_prints_n_a():
    attack = _attack_set(12, 14)  # 14 negatives: too few for 0.1%, 1%, 2%, 5%
    report = _score(attack, FragmentAuditOptions(n_splits=2, bootstrap_resamples=50))
    text = str(report)
    assert "LiRA's convention" in text.splitlines()[0]  # the header names the convention
    for needed in (1000, 100, 50, 20):
        assert f"n/a (needs >= {needed} negatives)" in text
    columns, rows = report.table()
    target = rows[0]
    assert target[0] == "target"
    assert target[columns.index("tpr@5%fpr at most")] == "n/a (needs >= 20 negatives)"
    assert target[columns.index("members")] == 12 and target[columns.index("negatives")] == 14
    assert "| 12      | 14        |" in text  # integer counts
    assert "negatives: 14" in text and "negatives needed for tpr@1%fpr: 100" in text
    # enough negatives for 10%: the number is printed as markdown_report's rule prints it
    wide = _score(
        attack, FragmentAuditOptions(n_splits=2, bootstrap_resamples=50, fpr_levels=(0.1,))
    )
    columns, rows = wide.table()
    value = wide.metrics["target"]["tpr@10%fpr at most"]
    assert rows[0][columns.index("tpr@10%fpr at most")] == format_rate(value, 14, 0.1)
    assert "n/a (needs" not in str(wide)


def test_the_blind_baseline_on_an_obvious_textual_difference_flags_every_attack():
    prompts = [f"Visit {i}: " for i in range(24)]
    fragments = [f"cardiology ward bed {i} heart monitor" for i in range(12)]
    fragments += [f"sunny weather forecast rain {i} wind" for i in range(12)]
    kinds = ["member"] * 12 + ["non_member"] * 12
    attack = AttackSet(prompts, fragments, [int(k == "member") for k in kinds], kinds)
    report = _score(attack, FragmentAuditOptions(n_splits=2, bootstrap_resamples=200))
    assert report.blind["auc"] == 1.0  # the texts alone tell the sets apart
    losers = [name for name, m in report.metrics.items() if m["beats_blind"] == 0.0]
    assert losers == list(report.metrics)  # no attack can clear an AUC of 1
    line = next(line for line in str(report).splitlines() if line.startswith("blind baseline"))
    assert "AUC 1.0000" in line and ", ".join(losers) in line
    columns, rows = report.table()
    assert rows[-1][0] == "blind baseline" and rows[-1][columns.index("auc")] == 1.0


def test_without_the_blind_baseline_there_is_no_flag_and_no_blind_row():
    attack = _attack_set(12, 14)
    report = _score(attack, FragmentAuditOptions(n_splits=2, blind_baseline=False))
    assert report.blind == {} and report.distribution == {}
    assert all("beats_blind" not in m for m in report.metrics.values())
    assert "blind baseline" not in str(report)


# -------------------------------------------------------------- extra attacks on a tiny GPT-2


def _filler(masked: str) -> list[str]:
    return ["big", "old", "wet"]


@pytest.fixture(scope="module")
def gpt2():
    attack = _attack_set(6, 8)
    texts = [p + f for p, f in zip(attack.prompts, attack.fragments)]
    tokenizer = train_bpe_tokenizer(texts, vocab_size=300)
    model = tiny_causal_lm(tokenizer, n_layer=1, n_embd=16, n_head=2, n_positions=256, seed=0)
    options = FragmentAuditOptions(
        n_splits=2,
        data_aware="logistic",
        bootstrap_resamples=50,
        min_k_sweep=(0.1, 0.5),
        extra_attacks=("gradnorm", "recall", "dc_pdd", "neighbourhood"),
    )
    auditor = FragmentAuditor(model, model, [model], tokenizer, options, mask_filler=_filler)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = auditor.run(attack)
    return {
        "attack": attack,
        "texts": texts,
        "tokenizer": tokenizer,
        "model": model,
        "options": options,
        "report": report,
    }


def test_gradnorm_in_the_report_equals_gradnorm_scores(gpt2):
    attack, tokenizer = gpt2["attack"], gpt2["tokenizer"]
    rows = [
        encode_prompt_fragment(tokenizer, p, f)[0] for p, f in zip(attack.prompts, attack.fragments)
    ]
    expected = gradnorm_scores(gpt2["model"], rows).numpy()
    np.testing.assert_allclose(gpt2["report"].scores["gradnorm"], expected, rtol=1e-10)


def test_recall_in_the_report_equals_recall_score_and_skips_its_prefix_queries(gpt2):
    attack, report, texts = gpt2["attack"], gpt2["report"], gpt2["texts"]
    scores = report.scores["recall"]
    prefix = np.flatnonzero(np.isnan(scores))
    assert len(prefix) == RECALL_SHOTS and all(attack.kinds[i] == "non_member" for i in prefix)
    scored = np.flatnonzero(~np.isnan(scores))
    plain, conditional = recall_token_log_probs(
        gpt2["model"], gpt2["tokenizer"], [texts[i] for i in scored], [texts[i] for i in prefix]
    )
    np.testing.assert_allclose(scores[scored], recall_score(plain, conditional).numpy(), rtol=1e-12)
    assert report.statistics["recall"]["non_members"] == 3  # 8 less the 5 in the prefix
    assert report.statistics["loss"]["non_members"] == 8


def test_dc_pdd_in_the_report_equals_dc_pdd_score_with_non_member_frequencies(gpt2):
    attack, tokenizer, model = gpt2["attack"], gpt2["tokenizer"], gpt2["model"]
    non_members = _texts(attack, 0)
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in non_members]
    frequencies = token_frequencies(ids, len(tokenizer))
    log_probs = fragment_token_statistics(
        model, tokenizer, attack.prompts, attack.fragments
    ).log_probs
    fragment_ids = []
    for p, f in zip(attack.prompts, attack.fragments):
        row, start = encode_prompt_fragment(tokenizer, p, f)
        fragment_ids.append(row[start:])
    expected = dc_pdd_score(fragment_ids, log_probs, frequencies).numpy()
    np.testing.assert_allclose(gpt2["report"].scores["dc_pdd"], expected, rtol=1e-10)
    # with a reference corpus its frequencies calibrate instead
    corpus = ("grey stones in the sand", "red and blue boxes")
    options = FragmentAuditOptions(n_splits=2, extra_attacks=("dc_pdd",), reference_corpus=corpus)
    own = extra_attack_scores(
        model, tokenizer, attack.prompts, attack.fragments, attack.labels, options
    )["dc_pdd"]
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in corpus]
    expected = dc_pdd_score(fragment_ids, log_probs, token_frequencies(ids, len(tokenizer)))
    np.testing.assert_allclose(own, expected.numpy(), rtol=1e-10)


def test_neighbourhood_in_the_report_equals_neighbourhood_score(gpt2):
    model, tokenizer, texts = gpt2["model"], gpt2["tokenizer"], gpt2["texts"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fewer distinct rewordings than NEIGHBOURS
        neighbours = make_neighbours(texts, _filler, n=NEIGHBOURS, seed=0)
    loss = torch.stack([-row.mean() for row in text_token_log_probs(model, tokenizer, texts)])
    neighbour_losses = [
        torch.stack([-row.mean() for row in text_token_log_probs(model, tokenizer, row)])
        for row in neighbours
    ]
    expected = neighbourhood_score(loss, neighbour_losses).numpy()
    # texts batched with other texts than here: float32 padding noise only
    np.testing.assert_allclose(gpt2["report"].scores["neighbourhood"], expected, atol=1e-6)


def test_the_min_k_sweep_adds_min_k_and_min_k_plus_plus_at_each_k(gpt2):
    attack, report = gpt2["attack"], gpt2["report"]
    tokens = fragment_token_statistics(
        gpt2["model"], gpt2["tokenizer"], attack.prompts, attack.fragments
    )
    for k, name in ((0.1, "10pct"), (0.5, "50pct")):
        expected = min_k_score(tokens.log_probs, k).numpy()
        np.testing.assert_allclose(report.scores[f"min_k_{name}"], expected, rtol=1e-10)
        plus = min_k_plus_plus_score(tokens.log_probs, tokens.means, tokens.stds, k).numpy()
        np.testing.assert_allclose(report.scores[f"min_k++_{name}"], plus, rtol=1e-10)
    assert "prism/min_kplusplus_10pct/auc" in report.scalars()
    assert all(math.isfinite(v) for v in report.scalars().values())


def test_neighbourhood_without_a_mask_filler_warns_once_and_is_left_out(gpt2):
    options = FragmentAuditOptions(
        n_splits=2, data_aware="logistic", bootstrap_resamples=50, extra_attacks=("neighbourhood",)
    )
    model, tokenizer = gpt2["model"], gpt2["tokenizer"]
    auditor = FragmentAuditor(model, model, [model], tokenizer, options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = auditor.run(gpt2["attack"])
    skipped = [w for w in caught if "neighbourhood attack is skipped" in str(w.message)]
    assert len(skipped) == 1 and "mask_filler" in str(skipped[0].message)
    assert "neighbourhood" not in report.scores and "neighbourhood" not in report.metrics


# -------------------------------------------------------------- the callback


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


def test_the_callback_logs_the_new_figures_and_writes_mimir_json(gpt2, tmp_path):
    tokenizer, attack = gpt2["tokenizer"], gpt2["attack"]
    enc = tokenizer(gpt2["texts"][:6], padding=True, return_tensors="pt")
    labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
    rows = [
        {"input_ids": i, "attention_mask": m, "labels": y}
        for i, m, y in zip(enc["input_ids"], enc["attention_mask"], labels)
    ]
    model = tiny_causal_lm(tokenizer, n_layer=1, n_embd=16, n_head=2, n_positions=256, seed=1)
    options = FragmentAuditOptions(n_splits=2, data_aware="logistic", bootstrap_resamples=50)
    callback = FragmentExtractionAudit(
        attack,
        model,
        [model],
        tokenizer=tokenizer,
        options=options,
        mimir_path=tmp_path / "mimir.json",
    )
    logger = _MemoryLogger()
    trainer = pl.Trainer(
        max_steps=1,
        logger=logger,
        callbacks=[callback],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    loader = torch.utils.data.DataLoader(rows, batch_size=6)
    trainer.fit(CausalLMFineTuner(model, optimizer=AdamWOptions(lr=1e-3)), loader)
    report = callback.report
    assert logger.metrics["prism/blind/auc"] == report.blind["auc"]
    for attack_name, metrics in report.metrics.items():
        for name, value in metrics.items():
            assert logger.metrics[metric_key("prism", attack_name, name)] == value
    assert "prism/loss/tpr_at_0.1pct_fpr_at_most" in logger.metrics
    assert all(METRIC_NAME.fullmatch(key) for key in logger.metrics)
    written = json.loads((tmp_path / "mimir.json").read_text())
    assert written == json.loads(json.dumps(report.mimir()))
    assert written["loss"]["name"] == "loss_threshold"


# -------------------------------------------------------------- bad options


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"extra_attacks": ("gradnorm", "lira")}, ValueError, r"unknown attacks \['lira'\]"),
        ({"extra_attacks": "recall"}, TypeError, r"wrap it: \('recall',\)"),
        ({"extra_attacks": ("recall", "recall")}, ValueError, "repeats an attack"),
        ({"bootstrap_resamples": 1}, ValueError, r"`bootstrap_resamples` must be >= 2"),
        ({"bootstrap_resamples": 10.0}, TypeError, r"`bootstrap_resamples` must be an int"),
        ({"blind_baseline": "no"}, TypeError, "blind_baseline"),
        ({"min_k_sweep": 0.1}, TypeError, r"`min_k_sweep` must be a sequence"),
        ({"min_k_sweep": (0.0,)}, ValueError, r"`min_k_sweep\[0\]` is a fraction"),
        ({"min_k_sweep": (0.1, 0.1)}, ValueError, "repeats a fraction"),
        ({"reference_corpus": "one text"}, TypeError, "reference_corpus"),
        ({"reference_corpus": ("  ",)}, ValueError, "holds no text"),
    ],
)
def test_bad_option_values_are_refused(kwargs, error, message):
    with pytest.raises(error, match=message):
        FragmentAuditOptions(**kwargs)


def test_a_mask_filler_that_is_not_callable_is_refused():
    with pytest.raises(TypeError, match="`mask_filler` must be a fill-mask pipeline"):
        FragmentAuditor(None, None, [None], object(), mask_filler="roberta-base")


def test_recall_with_too_few_non_members_for_its_prefix_is_refused(gpt2):
    attack = gpt2["attack"]
    options = FragmentAuditOptions(n_splits=2, extra_attacks=("recall",))
    keep = list(range(6)) + [6, 7, 8]  # 3 non-members: too few for a prefix of 5 and a score
    with pytest.raises(ValueError, match="give more than 5 non-members"):
        extra_attack_scores(
            gpt2["model"],
            gpt2["tokenizer"],
            [attack.prompts[i] for i in keep],
            [attack.fragments[i] for i in keep],
            [attack.labels[i] for i in keep],
            options,
        )


# -------------------------------------------------------------- shards (the DDP path)


def test_shards_scored_apart_equal_the_whole_set_s_statistics_and_report(gpt2):
    from lightning_info.core.distributed import strided_shard

    model, tokenizer, attack = gpt2["model"], gpt2["tokenizer"], gpt2["attack"]
    auditor = FragmentAuditor(model, model, [model], tokenizer, gpt2["options"], _filler)
    whole = auditor.token_statistics(attack)
    assert strided_shard(7, 0, 3) == [0, 3, 6] and strided_shard(7, 2, 3) == [2, 5]
    assert strided_shard(2, 3, 4) == []  # more ranks than queries: an empty shard
    shards = [strided_shard(len(attack), rank, 3) for rank in range(3)]
    assert sorted(i for shard in shards for i in shard) == list(range(len(attack)))
    parts = [auditor.token_statistics(attack, queries=shard) for shard in shards]
    for name, tokens in whole.items():
        for shard, part in zip(shards, parts):
            for k, index in enumerate(shard):
                torch.testing.assert_close(part[name].log_probs[k], tokens.log_probs[index])
                if name == "target":  # Min-K%++'s moments: the target's only
                    torch.testing.assert_close(part[name].means[k], tokens.means[index])
                    torch.testing.assert_close(part[name].stds[k], tokens.stds[index])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        given = auditor.run(attack, tokens=whole)
    report = gpt2["report"]
    for name, scores in report.scores.items():
        np.testing.assert_allclose(given.scores[name], scores, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    ("queries", "error", "message"),
    [
        ([0, True], TypeError, r"queries\[1\]"),
        ([0, 1.0], TypeError, r"queries\[1\]"),
        ([0, -1], ValueError, r"queries\[1\]"),
        ([0, 99], ValueError, "past the attack set's 14 queries"),
    ],
    ids=["bool", "float", "negative", "past-the-end"],
)
def test_queries_that_are_not_indices_of_the_attack_set_are_refused(gpt2, queries, error, message):
    model, tokenizer = gpt2["model"], gpt2["tokenizer"]
    auditor = FragmentAuditor(model, model, [model], tokenizer, gpt2["options"])
    with pytest.raises(error, match=message):
        auditor.token_statistics(gpt2["attack"], queries=queries)


def test_statistics_given_to_run_must_cover_every_model_and_query(gpt2):
    model, tokenizer, attack = gpt2["model"], gpt2["tokenizer"], gpt2["attack"]
    auditor = FragmentAuditor(model, model, [model], tokenizer, FragmentAuditOptions(n_splits=2))
    part = auditor.token_statistics(attack, queries=[0, 1, 2])
    with pytest.raises(ValueError, match="for each of the attack set's 14 queries"):
        auditor.run(attack, tokens=part)
    whole = auditor.token_statistics(attack)
    with pytest.raises(ValueError, match=r"\['target', 'shadow', 'world 0'\]"):
        auditor.run(attack, tokens={"target": whole["target"]})
