"""Bad input to PRISM's entry points fails early with a message naming the argument:
probabilities or ``+inf`` where log-probabilities are expected, the same record given as member
and non-member, unknown query kinds and kinds that contradict the label, a single string where
a list of strings is expected, and a truncated attack-set file."""

from __future__ import annotations

import json

import pytest
import torch

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
]
