"""Bad input to PRISM's entry points fails early with a message naming the argument:
probabilities or ``+inf`` where log-probabilities are expected, the same record given as member
and non-member, unknown query kinds and kinds that contradict the label, a single string where
a list of strings is expected, and a truncated attack-set file; bools, strings and complex
numbers where probabilities, scores or rates are expected, a 0/0 likelihood ratio, fold ids that
are not integer indices, non-int seeds, templates without a ``{context}`` field, and options,
prefixes and reports that would fail only after training."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from lightning_info.methods.prism import (
    FragmentAuditOptions,
    FragmentAuditReport,
    FragmentExtractionAudit,
    attack_metrics,
    data_aware_scores,
    fragment_log_probability,
    fragment_prompt,
    likelihood_ratio,
    posterior,
    prism_score,
    record_texts,
    synthetic_records,
    tpr_at_fpr,
)
from lightning_info.methods.prism.attacks import (
    loss_score,
    min_k_plus_plus_score,
    min_k_score,
    reference_ratio_score,
    zlib_score,
)
from lightning_info.methods.prism.auditor import FragmentAuditor
from lightning_info.methods.prism.fragments import AttackSet, build_attack_set
from lightning_info.methods.prism.functional import world_log_probability

RECORDS = [["asthma", "copd", "eczema"], ["gout", "anemia", "migraine"]]
OTHERS = [["psoriasis", "lupus", "angina"]]
NOT_LOG = r"holds .* > 0, which is not a log-probability .*log_softmax"
LOG_PROBS = [torch.tensor([-0.5, -1.0])]


def _truncated(folder) -> AttackSet:
    path = folder / "attack.json"
    text = json.dumps({"prompts": ["a"], "fragments": ["b"], "labels": [1], "kinds": ["member"]})
    path.write_text(text[:-7], encoding="utf-8")
    return AttackSet.load(path)


def _truncated_audit(folder) -> FragmentExtractionAudit:
    path = folder / "attack.json"
    path.write_text('{"prompts": ["a"], "fragments": ["b"], "labels": [1', encoding="utf-8")
    return FragmentExtractionAudit(str(path), shadow=object(), world_models=[object()])


def _attack_set() -> AttackSet:
    return AttackSet(["p", "q"], ["f", "g"], [1, 0], ["member", "non_member"])


def _features():
    x = torch.arange(40, dtype=torch.float64).reshape(20, 2)
    return x, [0, 1] * 10


def _report():
    return FragmentAuditReport(np.array([0, 1]), {}, {}, {})


def _score(**log_probs):
    auditor = FragmentAuditor(
        target=object(), shadow=object(), world_models=[object()], tokenizer=1
    )
    values = {"target": [-1.0, -2.0], "shadow": [-1.5, -1.0], "world": [-2.0, -2.5]}
    return auditor.score(values | log_probs, [1, 0])


BAD_INPUT = [
    pytest.param(
        lambda: loss_score([torch.tensor([0.5, 0.2])]),
        ValueError,
        r"`log_probs\[0\]` " + NOT_LOG,
        id="loss-probabilities",
    ),
    pytest.param(
        lambda: loss_score([torch.tensor([-0.5, float("inf")])]),
        ValueError,
        r"`log_probs\[0\]` holds inf > 0",
        id="loss-plus-inf",
    ),
    pytest.param(
        lambda: min_k_score([torch.tensor([3.0, -1.0])]),
        ValueError,
        r"`log_probs\[0\]` " + NOT_LOG,
        id="min-k-logits",
    ),
    pytest.param(
        lambda: min_k_plus_plus_score(
            [torch.tensor([0.4, 0.6])], [torch.tensor([-1.0, -1.0])], [torch.ones(2)]
        ),
        ValueError,
        r"`log_probs\[0\]` " + NOT_LOG,
        id="min-k-plus-plus-probabilities",
    ),
    pytest.param(
        lambda: min_k_plus_plus_score(LOG_PROBS, LOG_PROBS, [torch.tensor([1.0, float("inf")])]),
        ValueError,
        r"`stds\[0\]` contains inf",
        id="min-k-plus-plus-std-inf",
    ),
    pytest.param(
        lambda: zlib_score(LOG_PROBS, "asthma"),
        TypeError,
        r"`texts` must be a sequence of strings, got a single str",
        id="zlib-texts-bare-string",
    ),
    pytest.param(
        lambda: reference_ratio_score(LOG_PROBS, [torch.tensor([0.5, 0.5])]),
        ValueError,
        r"`reference_log_probs\[0\]` " + NOT_LOG,
        id="reference-probabilities",
    ),
    pytest.param(
        lambda: loss_score(torch.tensor([-0.5, -1.0])),
        ValueError,
        r"`log_probs` is one 1-D tensor; give a list with one tensor .* per text",
        id="loss-one-flat-tensor",
    ),
    pytest.param(
        lambda: world_log_probability([torch.tensor([0.3, 0.9])]),
        ValueError,
        r"`log_probs\[0\]` " + NOT_LOG,
        id="world-probabilities",
    ),
    pytest.param(
        lambda: world_log_probability([torch.tensor([-0.3, -0.9]), torch.tensor([-0.3])]),
        ValueError,
        r"Every world model must score the same queries, got lengths \[2, 1\]",
        id="world-lengths-differ",
    ),
    pytest.param(
        lambda: _score(target=[0.5, 0.2]),
        ValueError,
        r"`log_probs\['target'\]` " + NOT_LOG,
        id="auditor-score-probabilities",
    ),
    pytest.param(
        lambda: _score(world=[-1.0]),
        ValueError,
        r"log_probs\['world'\] 1.*labels 2",
        id="auditor-score-lengths",
    ),
    pytest.param(
        lambda: build_attack_set(RECORDS, RECORDS),
        ValueError,
        r"2 record\(s\) appear both in `members` and in `non_members`",
        id="attack-set-overlap-all",
    ),
    pytest.param(
        lambda: build_attack_set(RECORDS, [*OTHERS, RECORDS[1]]),
        ValueError,
        r"1 record\(s\) appear both",
        id="attack-set-overlap-one",
    ),
    pytest.param(
        lambda: build_attack_set(["asthma, copd"], OTHERS),
        TypeError,
        r"`members\[0\]` must be a sequence of strings, got a single str",
        id="attack-set-record-string",
    ),
    pytest.param(
        lambda: AttackSet(["p"], ["f"], [1], ["memebr"]),
        ValueError,
        r"`kinds` holds \['memebr'\]; each kind must be one of "
        r"\('member', 'non_member', 'unseen'\)",
        id="attack-set-unknown-kind",
    ),
    pytest.param(
        lambda: AttackSet(["p"], ["f"], [0], ["member"]),
        ValueError,
        r"Query 0 is of kind 'member' but has label 0",
        id="attack-set-kind-contradicts-label",
    ),
    pytest.param(
        lambda: AttackSet('["p", "q"]', ["f", "g"], [1, 0], ["member", "unseen"]),
        TypeError,
        r"`prompts` must be a sequence of strings, got a single str \(it looks like JSON: "
        r"parse it with json.loads first\)",
        id="attack-set-prompts-json-string",
    ),
    pytest.param(
        _truncated,
        ValueError,
        r"attack.json, line 1, column \d+: not valid JSON",
        id="attack-set-load-truncated",
    ),
    pytest.param(
        lambda: fragment_log_probability(
            object(), None, ["a: ", "b: "], ["x", "y"], batch_size=True
        ),
        TypeError,
        r"`batch_size` must be an int, got True",
        id="log-probability-batch-size-bool",
    ),
    pytest.param(
        lambda: fragment_log_probability(object(), None, "a: ", ["x", "y"]),
        TypeError,
        r"`prompts` must be a sequence of strings, got a single str",
        id="log-probability-prompts-string",
    ),
    pytest.param(
        lambda: fragment_log_probability(object(), None, ["a: ", "b: "], ["x"]),
        ValueError,
        r"Got 2 prompts but 1 fragments; they must pair up",
        id="log-probability-unpaired",
    ),
    pytest.param(
        lambda: fragment_log_probability(object(), None, [], []),
        ValueError,
        r"There are no \(prompt, fragment\) pairs to score",
        id="log-probability-empty",
    ),
    pytest.param(
        lambda: fragment_log_probability(
            object(), None, ["a: ", "b: "], ["x", "y"], move_trailing_space="no"
        ),
        TypeError,
        r"`move_trailing_space` must be True or False, got 'no'",
        id="log-probability-move-space-string",
    ),
    pytest.param(
        lambda: fragment_log_probability(object(), None, ["a: ", "b: "], ["x", "y"]),
        TypeError,
        r"Expected a transformers causal language model, got object",
        id="log-probability-not-a-model",
    ),
    pytest.param(
        lambda: likelihood_ratio([True], [0.5]),
        TypeError,
        r"`p_target` must hold real numbers, got bools",
        id="likelihood-ratio-bools",
    ),
    pytest.param(
        lambda: likelihood_ratio(["0.5"], [0.5]),
        TypeError,
        r"`p_target` must hold real numbers, got <U3 values",
        id="likelihood-ratio-strings",
    ),
    pytest.param(
        lambda: likelihood_ratio(torch.tensor([0.5 + 0j]), [0.5]),
        TypeError,
        r"`p_target` must hold real numbers, got complex numbers",
        id="likelihood-ratio-complex",
    ),
    pytest.param(
        lambda: likelihood_ratio([0.5, 0.2], [0.5]),
        ValueError,
        r"`p_target` has 2 values but `p_shadow` has 1",
        id="likelihood-ratio-lengths",
    ),
    pytest.param(
        lambda: likelihood_ratio([0.0], [0.0], eps=0.0),
        ValueError,
        r"`p_target` and `p_shadow` are both 0 .* the ratio 0/0 is undefined",
        id="likelihood-ratio-zero-over-zero",
    ),
    pytest.param(
        lambda: likelihood_ratio([[0.5, 0.2], [0.1, 0.3]], [0.5, 0.1, 0.2, 0.3]),
        ValueError,
        r"`p_target` must be 1-D \(one value per query\), got shape \(2, 2\)",
        id="likelihood-ratio-matrix",
    ),
    pytest.param(
        lambda: likelihood_ratio([float("nan")], [0.5]),
        ValueError,
        r"`p_target` contains NaN or inf",
        id="likelihood-ratio-nan",
    ),
    pytest.param(
        lambda: posterior([1.0], prior="0.9"),
        TypeError,
        r"`prior` must be a real number, got '0.9'",
        id="posterior-prior-string",
    ),
    pytest.param(
        lambda: posterior([1.0], prior=True),
        TypeError,
        r"`prior` must be a real number, got True",
        id="posterior-prior-bool",
    ),
    pytest.param(
        lambda: posterior([1.0], prior=1.0),
        ValueError,
        r"`prior` must lie in \(0, 1\), got 1.0",
        id="posterior-prior-one",
    ),
    pytest.param(
        lambda: posterior([-1.0]),
        ValueError,
        r"`lr` must be >= 0",
        id="posterior-negative-ratio",
    ),
    pytest.param(
        lambda: prism_score([0.5], [0.5], [0.5, 0.2]),
        ValueError,
        r"`p_shadow` has 1 values but `p_world` has 2",
        id="prism-lengths",
    ),
    pytest.param(
        lambda: prism_score([0.5], [0.5], [2.0]),
        ValueError,
        r"`p_world` must hold probabilities in \[0, 1\]",
        id="prism-world-not-probability",
    ),
    pytest.param(
        lambda: prism_score([0.5], [0.5], [0.5], prior=True),
        TypeError,
        r"`prior` must be a real number, got True",
        id="prism-prior-bool",
    ),
    pytest.param(
        lambda: data_aware_scores(*_features(), n_splits=2, seed=1.5),
        TypeError,
        r"`seed` must be an int, got 1.5",
        id="data-aware-seed-float",
    ),
    pytest.param(
        lambda: data_aware_scores(*_features(), n_splits=2, seed=True),
        TypeError,
        r"`seed` must be an int, got True",
        id="data-aware-seed-bool",
    ),
    pytest.param(
        lambda: data_aware_scores(*_features(), folds=np.array([0.5, 1.7] * 10)),
        TypeError,
        r"`folds` must hold integer indices, got dtype torch.float64",
        id="data-aware-folds-float",
    ),
    pytest.param(
        lambda: data_aware_scores(*_features(), folds=[-1, 1] * 10),
        ValueError,
        r"`folds` must hold indices >= 0, got -1",
        id="data-aware-folds-negative",
    ),
    pytest.param(
        lambda: data_aware_scores(*_features(), folds=[0, 1]),
        ValueError,
        r"`folds` has 2 ids for 20 samples",
        id="data-aware-folds-length",
    ),
    pytest.param(
        lambda: data_aware_scores([["a", "b"]], [1]),
        TypeError,
        r"`features` must hold real numbers, got <U1 values",
        id="data-aware-features-strings",
    ),
    pytest.param(
        lambda: data_aware_scores(*_features(), classifier="forest"),
        ValueError,
        r"`classifier` must be one of \('boosted_trees', 'logistic'\)",
        id="data-aware-unknown-classifier",
    ),
    pytest.param(
        lambda: tpr_at_fpr([0.1, 0.9], [0, 1], True),
        TypeError,
        r"`fpr_level` must be a real number, got True",
        id="tpr-level-bool",
    ),
    pytest.param(
        lambda: tpr_at_fpr([0.1, 0.9], [0, 1], "0.1"),
        TypeError,
        r"`fpr_level` must be a real number, got '0.1'",
        id="tpr-level-string",
    ),
    pytest.param(
        lambda: tpr_at_fpr([0.1, 0.9], [1, 1], 0.1),
        ValueError,
        r"TPR at FPR is undefined with only one class",
        id="tpr-one-class",
    ),
    pytest.param(
        lambda: tpr_at_fpr([0.1, 0.9], [0, 2], 0.1),
        ValueError,
        r"`labels` must hold only 0/1",
        id="tpr-labels-not-binary",
    ),
    pytest.param(
        lambda: attack_metrics([0.1, 0.9], [0, 1], "0.1"),
        TypeError,
        r"`fpr_levels` must be a sequence of rates in \[0, 1\], got '0.1'",
        id="metrics-levels-string",
    ),
    pytest.param(
        lambda: attack_metrics([0.1, 0.9], [0, 1], 0.1),
        TypeError,
        r"`fpr_levels` must be a sequence of rates in \[0, 1\], got 0.1",
        id="metrics-levels-number",
    ),
    pytest.param(
        lambda: attack_metrics([0.1, 0.9], [0, 1, 1]),
        ValueError,
        r"`scores` and `labels` must have the same length, got 2 and 3",
        id="metrics-lengths",
    ),
    pytest.param(
        lambda: fragment_prompt("asthma"),
        TypeError,
        r"`context` must be a sequence of strings, got a single str",
        id="prompt-context-string",
    ),
    pytest.param(
        lambda: fragment_prompt([1, 2]),
        TypeError,
        r"`context\[0\]` must be a string, got int 1",
        id="prompt-context-ints",
    ),
    pytest.param(
        lambda: fragment_prompt(["a"], template="no field"),
        ValueError,
        r"`template` must have exactly one field, \{context\}, got fields \[\]",
        id="prompt-template-without-field",
    ),
    pytest.param(
        lambda: fragment_prompt(["a"], template="{record}"),
        ValueError,
        r"`template` must have exactly one field, \{context\}, got fields \['record'\]",
        id="prompt-template-other-field",
    ),
    pytest.param(
        lambda: fragment_prompt([]),
        ValueError,
        r"The context needs at least one known fragment",
        id="prompt-empty-context",
    ),
    pytest.param(
        lambda: record_texts("asthma"),
        TypeError,
        r"`record` must be a sequence of strings, got a single str",
        id="record-texts-string",
    ),
    pytest.param(
        lambda: record_texts(["asthma"]),
        ValueError,
        r"`record` needs >= 2 fragments",
        id="record-texts-one-fragment",
    ),
    pytest.param(
        lambda: record_texts(["a", "b"], template=3),
        TypeError,
        r"`template` must be a string with a \{context\} field, got 3",
        id="record-texts-template-int",
    ),
    pytest.param(
        lambda: synthetic_records(2, seed="a"),
        TypeError,
        r"`seed` must be an int, got 'a'",
        id="synthetic-seed-string",
    ),
    pytest.param(
        lambda: synthetic_records(2, seed=-1),
        ValueError,
        r"`seed` must be >= 0, got -1",
        id="synthetic-seed-negative",
    ),
    pytest.param(
        lambda: synthetic_records(2, profile_weight=float("inf")),
        ValueError,
        r"`profile_weight` must be finite, got inf",
        id="synthetic-profile-weight-inf",
    ),
    pytest.param(
        lambda: synthetic_records(2, second_profile=True),
        TypeError,
        r"`second_profile` must be a real number, got True",
        id="synthetic-second-profile-bool",
    ),
    pytest.param(
        lambda: synthetic_records(True),
        TypeError,
        r"`n_records` must be an int, got True",
        id="synthetic-count-bool",
    ),
    pytest.param(
        lambda: build_attack_set([["a", "b"]], [["c", "d"]], seed=0.5),
        TypeError,
        r"`seed` must be an int, got 0.5",
        id="attack-set-seed-float",
    ),
    pytest.param(
        lambda: FragmentAuditOptions(prior="0.9"),
        TypeError,
        r"`prior` must be a real number, got '0.9'",
        id="options-prior-string",
    ),
    pytest.param(
        lambda: FragmentAuditOptions(min_k=True),
        TypeError,
        r"`min_k` must be a real number, got True",
        id="options-min-k-bool",
    ),
    pytest.param(
        lambda: FragmentAuditOptions(fpr_levels=0.05),
        TypeError,
        r"`fpr_levels` must be a sequence of rates in \(0, 1\], got 0.05",
        id="options-levels-number",
    ),
    pytest.param(
        lambda: FragmentAuditOptions(fpr_levels=(True,)),
        TypeError,
        r"`fpr_levels\[0\]` must be a real number, got True",
        id="options-levels-bool",
    ),
    pytest.param(
        lambda: FragmentAuditOptions(fpr_levels=(0.0,)),
        ValueError,
        r"`fpr_level` must lie in \(0, 1\], got 0.0",
        id="options-levels-zero",
    ),
    pytest.param(
        lambda: _report().table(),
        ValueError,
        r"The report has no metrics",
        id="report-table-without-metrics",
    ),
    pytest.param(
        lambda: _report().scalars(3),
        TypeError,
        r"`prefix` must be a string, got 3",
        id="report-scalars-prefix-int",
    ),
    pytest.param(
        lambda: FragmentExtractionAudit(_attack_set(), object(), []),
        ValueError,
        r"Give at least one world model in `world_models`",
        id="audit-callback-no-world-model",
    ),
    pytest.param(
        lambda: FragmentExtractionAudit(_attack_set(), object(), [object()], prefix=""),
        ValueError,
        r"`prefix` must be a non-empty string",
        id="audit-callback-empty-prefix",
    ),
    pytest.param(
        lambda: FragmentExtractionAudit(_attack_set(), object(), [object()], options={}),
        TypeError,
        r"`options` must be a FragmentAuditOptions, got dict",
        id="audit-callback-options-dict",
    ),
    pytest.param(
        lambda: FragmentExtractionAudit(None, object(), [object()]),
        TypeError,
        r"Expected an AttackSet, got NoneType",
        id="audit-callback-no-attack-set",
    ),
    pytest.param(
        _truncated_audit,
        ValueError,
        r"attack.json, line 1, column \d+: not valid JSON",
        id="audit-callback-truncated-attack-set",
    ),
]


from lightning_info.methods.prism import functional as _core  # noqa: E402
from lightning_info.methods.prism.attacks import negatives_for_fpr  # noqa: E402

BAD_INPUT += [
    pytest.param(
        lambda: _core.FragmentTokens([torch.zeros(2)], [], [torch.zeros(2)]),
        ValueError,
        r"`means` and `stds` must both be empty or hold one entry per fragment",
        id="fragment-tokens-stds-without-means",
    ),
    pytest.param(
        lambda: _core.FragmentTokens([torch.zeros(2)], [torch.zeros(1)], [torch.zeros(1)]),
        ValueError,
        r"fragment 0 has 2 log_probs but 1 means and 1 stds",
        id="fragment-tokens-token-count",
    ),
    pytest.param(
        lambda: _core.FragmentTokens(torch.zeros(1, 2), [], []),
        TypeError,
        r"`log_probs` must be a list of 1-D tensors, one per fragment",
        id="fragment-tokens-tensor-not-list",
    ),
    pytest.param(
        lambda: _core.FragmentTokens([torch.tensor([-0.5, 0.25])], [], []),
        ValueError,
        r"`log_probs\[0\]` holds 0.25 > 0, which is not a log-probability",
        id="fragment-tokens-probabilities",
    ),
    pytest.param(
        lambda: _core.check_prior(True),
        TypeError,
        r"`prior` must be a real number, got True",
        id="check-prior-bool",
    ),
    pytest.param(
        lambda: _core.check_prior(1.0),
        ValueError,
        r"`prior` must lie in \(0, 1\), got 1.0",
        id="check-prior-one",
    ),
    pytest.param(
        lambda: _core.encode_prompt_fragment(None, 3, "asthma"),
        TypeError,
        r"Prompts and fragments must be strings",
        id="encode-prompt-fragment-non-string",
    ),
    pytest.param(
        lambda: _core.encode_prompt_fragment(None, "Diagnosis: ", "  "),
        ValueError,
        r"A fragment is empty or whitespace only",
        id="encode-prompt-fragment-blank",
    ),
    pytest.param(
        lambda: _core.fragment_token_statistics(None, None, "Diagnosis: ", ["asthma"]),
        TypeError,
        r"`prompts` must be a sequence of strings, got a single str",
        id="fragment-token-statistics-bare-prompt",
    ),
    pytest.param(
        lambda: _core.fragment_token_statistics(None, None, ["a", "b"], ["asthma"]),
        ValueError,
        r"Got 2 prompts but 1 fragments; they must pair up",
        id="fragment-token-statistics-unpaired",
    ),
    pytest.param(
        lambda: _core.fragment_token_statistics(None, None, ["a"], ["b"], batch_size=True),
        TypeError,
        r"`batch_size` must be an int, got True",
        id="fragment-token-statistics-bool-batch",
    ),
    pytest.param(
        lambda: _core.fragment_token_statistics(None, None, ["a"], ["b"]),
        TypeError,
        r"Expected a transformers causal language model, got NoneType",
        id="fragment-token-statistics-not-a-model",
    ),
    pytest.param(
        lambda: negatives_for_fpr(True),
        TypeError,
        r"`fpr_level` must be a real number, got True",
        id="negatives-for-fpr-bool",
    ),
    pytest.param(
        lambda: negatives_for_fpr("0.01"),
        TypeError,
        r"`fpr_level` must be a real number, got '0.01'",
        id="negatives-for-fpr-string",
    ),
    pytest.param(
        lambda: negatives_for_fpr(torch.tensor(0.01)),
        TypeError,
        r"`fpr_level` must be a real number, got tensor",
        id="negatives-for-fpr-float32-tensor",
    ),
    pytest.param(
        lambda: negatives_for_fpr(0.0),
        ValueError,
        r"`fpr_level` must lie in \(0, 1\], got 0.0",
        id="negatives-for-fpr-zero",
    ),
    pytest.param(
        lambda: _core.roc_auc([0.3, 0.7, 0.1], [1, 0]),
        ValueError,
        r"`scores` and `labels` must have the same length, got 3 and 2",
        id="roc-auc-unpaired",
    ),
    pytest.param(
        lambda: _core.roc_auc([0.3, 0.7], [2, 0]),
        ValueError,
        r"`labels` must hold only 0/1 or True/False, found \[2.0\]",
        id="roc-auc-label-two",
    ),
]

from lightning_info.methods.prism import model_attacks as _models  # noqa: E402

# The audit statistics, the blind baseline and the attacks added beside them.
BAD_INPUT += [
    pytest.param(
        lambda: _core.beats_blind(0.8, -0.1, 0.5),
        ValueError,
        r"`attack_se` must be >= 0 \(a standard error\), got -0.1",
        id="beats-blind-negative-se",
    ),
    pytest.param(
        lambda: _core.blind_baseline_auc("a text", ["b"]),
        TypeError,
        r"`member_texts` must be a sequence of strings, got a single str",
        id="blind-auc-bare-string",
    ),
    pytest.param(
        lambda: _core.blind_baseline_scores(["a", "b"], ["c", "d"], folds=5),
        ValueError,
        r"5-fold stratified cross-validation needs at least 5 texts in each set",
        id="blind-scores-too-few-texts",
    ),
    pytest.param(
        lambda: _core.bootstrap_auc([0.1, 0.9], [1, 0], resamples=1),
        ValueError,
        r"`resamples` must be >= 2",
        id="bootstrap-one-resample",
    ),
    pytest.param(
        lambda: _core.dc_pdd_score([[1]], LOG_PROBS[:1], torch.tensor([0.5, 0.5]), a=0.0),
        ValueError,
        r"`a` is the upper bound on each token's score and must be > 0",
        id="dc-pdd-zero-bound",
    ),
    pytest.param(
        lambda: _core.deduplicate_non_members(["a"], ["b"], ns=()),
        ValueError,
        r"`ns` is empty",
        id="deduplicate-no-lengths",
    ),
    pytest.param(
        lambda: _core.distribution_check([], ["b"]),
        ValueError,
        r"`member_texts` is empty",
        id="distribution-check-no-members",
    ),
    pytest.param(
        lambda: _core.text_distribution("one text", ["b"]),
        TypeError,
        r"`member_texts` must be a sequence of strings, got a single str",
        id="text-distribution-bare-string",
    ),
    pytest.param(
        lambda: _core.text_distribution(["a"], []),
        ValueError,
        r"`non_member_texts` is empty",
        id="text-distribution-no-non-members",
    ),
    pytest.param(
        lambda: _core.enough_negatives(-1, 0.01),
        ValueError,
        r"`num_negatives` must be >= 0, got -1",
        id="enough-negatives-negative",
    ),
    pytest.param(
        lambda: _core.format_rate(float("nan"), 1000, 0.01),
        ValueError,
        r"`value` must be finite, got nan",
        id="format-rate-nan",
    ),
    pytest.param(
        lambda: _core.markdown_report({}),
        TypeError,
        r"`report` must be a non-empty \{attack: row\} mapping",
        id="markdown-report-empty",
    ),
    pytest.param(
        lambda: _core.membership_report([0.1, 0.9], [1, 0]),
        TypeError,
        r"`scores` must map each attack's name to its scores, got list",
        id="membership-report-list",
    ),
    pytest.param(
        lambda: _core.mimir_layout({"loss": {"auc": 0.5}}),
        ValueError,
        r"Report row 'loss' lacks \['auc_se'",
        id="mimir-layout-partial-row",
    ),
    pytest.param(
        lambda: _core.neighbourhood_score(torch.tensor([-0.5]), [torch.tensor([1.0])]),
        ValueError,
        r"`loss_of_text` holds a negative value",
        id="neighbourhood-negative-loss",
    ),
    pytest.param(
        lambda: _core.ngram_overlap(["a"], ["b"], n=0),
        ValueError,
        r"`n` must be >= 1, got 0",
        id="ngram-overlap-zero",
    ),
    pytest.param(
        lambda: _core.pr_auc([0.1, 0.9], [1, 1]),
        ValueError,
        r"only one class is present in `labels`",
        id="pr-auc-one-class",
    ),
    pytest.param(
        lambda: _core.recall_score(LOG_PROBS[:1], [torch.tensor([-0.5, -0.1, -0.2])]),
        ValueError,
        r"Text 0: `log_probs` has 2 tokens but `conditional_log_probs` has 3",
        id="recall-unaligned-tokens",
    ),
    pytest.param(
        lambda: _core.token_frequencies([], 10),
        ValueError,
        r"`token_id_rows` is empty",
        id="token-frequencies-empty",
    ),
    pytest.param(
        lambda: _core.tpr_at_fpr_levels([0.1, 0.9], [1, 0], levels=(1.0,)),
        ValueError,
        r"must lie in \(0, 1\), got 1.0",
        id="tpr-levels-one",
    ),
    pytest.param(
        lambda: _models.gradnorm_scores(None, [[1, 2]]),
        TypeError,
        r"Expected a transformers causal language model, got NoneType",
        id="gradnorm-not-a-model",
    ),
    pytest.param(
        lambda: _models.make_neighbours(["a text"]),
        _models.NeighbourhoodUnavailable,
        r"needs a mask filler",
        id="neighbours-without-mask-filler",
    ),
    pytest.param(
        lambda: _models.recall_token_log_probs(None, None, ["a"], []),
        ValueError,
        r"`prefix_texts` must hold one or more non-empty non-member texts",
        id="recall-no-prefix",
    ),
    pytest.param(
        lambda: _models.text_token_log_probs(None, None, "a text"),
        TypeError,
        r"`texts` must be a sequence of strings, got a single str",
        id="text-log-probs-bare-string",
    ),
]


def test_negatives_for_fpr_and_roc_auc_match_closed_forms():
    """``ceil(1 / level)`` for exact levels; the AUROC of a brute-force pair count."""
    assert [negatives_for_fpr(v) for v in (0.01, 0.001, 0.3, 1)] == [100, 1000, 4, 1]
    scores, labels = [0.9, 0.4, 0.4, 0.1], [1, 1, 0, 0]
    pairs = [(s, t) for s, y in zip(scores, labels) if y for t, z in zip(scores, labels) if not z]
    brute = sum(1.0 if s > t else 0.5 if s == t else 0.0 for s, t in pairs) / len(pairs)
    assert _core.roc_auc(scores, labels) == pytest.approx(brute)
