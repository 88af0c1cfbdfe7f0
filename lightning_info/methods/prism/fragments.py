"""Synthetic records of correlated fragments and the attack set of a fragment-extraction audit.

A *record* is a list of 5 to 10 distinct fragments (here: medical conditions), drawn from a small
vocabulary with a latent-profile structure: each record has a main profile (e.g.
cardiometabolic) whose conditions are much more likely than the rest, and sometimes a second
one, so that some fragments co-occur. That gives a model something to learn beyond the
vocabulary itself: a general ("world") model learns the co-occurrence, a model fine-tuned on the
records (the "target") also learns which record held which fragment.

:func:`build_attack_set` turns member records (used in fine-tuning), non-member records (held
out) and a pool of fragments that appear in no record into attack queries: a target fragment
``y`` of a record, with the record's other fragments as the context of the note's prompt
(:func:`fragment_prompt`). Labels: 1 for fragments of member records, 0 for fragments of
held-out records and for unseen fragments.
"""

from __future__ import annotations

import json
import random
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lightning_info.core.files import atomic_write_text, read_json
from lightning_info.core.validation import (
    require_int,
    require_positive,
    require_probability,
    require_string_sequence,
)

__all__ = [
    "PROFILES",
    "PROMPT_TEMPLATE",
    "QUERY_KINDS",
    "UNSEEN_FRAGMENTS",
    "WORLD_TEMPLATE",
    "AttackSet",
    "build_attack_set",
    "fragment_prompt",
    "record_texts",
    "synthetic_records",
]

PROMPT_TEMPLATE = (
    "Consider an individual whose medical summary contains: {context}. "
    "That individual's medical summary then also includes: "
)
"""The note's prompt; the candidate fragment follows it directly (the reference's wording)."""

WORLD_TEMPLATE = "Problem list ({context}) and: "
"""Another format for a world model's training texts: a general model knows which conditions go
together, but not the audited notes' wording, so on the audit's queries it gives the records'
fragments less probability than a shadow trained in that wording (the condition PRISM needs)."""

PROFILES: dict[str, tuple[str, ...]] = {
    "cardiometabolic": (
        "hypertension",
        "type 2 diabetes",
        "hyperlipidemia",
        "obesity",
        "coronary artery disease",
        "atrial fibrillation",
        "chronic kidney disease",
        "heart failure",
    ),
    "respiratory": (
        "asthma",
        "chronic obstructive pulmonary disease",
        "allergic rhinitis",
        "sleep apnea",
        "chronic bronchitis",
        "pneumonia",
        "tobacco use",
    ),
    "mental health": (
        "major depressive disorder",
        "generalized anxiety disorder",
        "insomnia",
        "bipolar disorder",
        "post-traumatic stress disorder",
        "alcohol use disorder",
        "panic disorder",
    ),
    "musculoskeletal": (
        "osteoarthritis",
        "chronic low back pain",
        "osteoporosis",
        "rheumatoid arthritis",
        "gout",
        "fibromyalgia",
        "carpal tunnel syndrome",
    ),
    "digestive": (
        "gastroesophageal reflux disease",
        "irritable bowel syndrome",
        "celiac disease",
        "fatty liver disease",
        "gallstones",
        "diverticulitis",
        "peptic ulcer",
    ),
}
"""Latent profiles: the conditions of a profile co-occur in records."""

UNSEEN_FRAGMENTS: tuple[str, ...] = (
    "sarcoidosis",
    "myasthenia gravis",
    "wilson disease",
    "addison disease",
    "huntington disease",
    "narcolepsy",
    "scleroderma",
    "acromegaly",
    "porphyria",
    "amyloidosis",
    "pheochromocytoma",
    "kawasaki disease",
)
"""Conditions that :func:`synthetic_records` never draws: the random unseen negatives."""

QUERY_KINDS = ("member", "non_member", "unseen")
"""The kinds of attack query: a fragment of a member record (label 1), of a held-out record or
a fragment in no record (label 0)."""


@dataclass(frozen=True)
class AttackSet:
    """Attack queries: ``prompts[i] + fragments[i]`` is scored, ``labels[i]`` says if a member.

    ``kinds[i]`` is ``"member"``, ``"non_member"`` or ``"unseen"``; ``records[i]`` is the index
    of the record (in the member or non-member list, by kind; for unseen queries the member
    record whose context was used).
    """

    prompts: list[str]
    fragments: list[str]
    labels: list[int]
    kinds: list[str]
    records: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name in ("prompts", "fragments", "kinds"):
            object.__setattr__(self, name, require_string_sequence(getattr(self, name), name))
        n = len(self.prompts)
        lengths = {len(self.fragments), len(self.labels), len(self.kinds)}
        if self.records:
            lengths.add(len(self.records))
        if lengths != {n}:
            raise ValueError("An AttackSet's prompts, fragments, labels and kinds must align.")
        if not set(self.labels) <= {0, 1}:
            raise ValueError("AttackSet labels must be 0 or 1.")
        unknown = sorted(set(self.kinds) - set(QUERY_KINDS))
        if unknown:
            raise ValueError(f"`kinds` holds {unknown}; each kind must be one of {QUERY_KINDS}.")
        for i, (label, kind) in enumerate(zip(self.labels, self.kinds)):
            if label != (kind == "member"):
                raise ValueError(
                    f"Query {i} is of kind {kind!r} but has label {label}; members have label 1, "
                    "non-members and unseen fragments label 0."
                )

    def __len__(self) -> int:
        return len(self.prompts)

    def save(self, path: str | Path) -> Path:
        """Write the queries as JSON (the format :meth:`load` reads)."""
        path = Path(path)
        atomic_write_text(path, json.dumps(asdict(self), indent=1) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> AttackSet:
        """Read an attack set written by :meth:`save`: a JSON object with the lists ``prompts``,
        ``fragments``, ``labels`` (1 = member), ``kinds`` and optionally ``records``."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"attack set file {path} does not exist.")
        data = read_json(path)
        keys = ("prompts", "fragments", "labels", "kinds")
        missing = [key for key in keys if key not in data] if isinstance(data, dict) else keys
        if missing:
            raise ValueError(f"{path} is not an attack set: it lacks the lists {missing}.")
        unknown = sorted(set(data) - {*keys, "records"})
        if unknown:
            raise ValueError(f"{path} is not an attack set: unknown keys {unknown}.")
        return cls(**dict(data.items()))


def fragment_prompt(context: Sequence[str], template: str = PROMPT_TEMPLATE) -> str:
    """The prompt that lists the known ``context`` fragments, comma-separated, in ``template``
    (a string whose only field is ``{context}``)."""
    if context is None or (isinstance(context, Sequence) and len(context) == 0):
        raise ValueError("The context needs at least one known fragment.")
    context = require_string_sequence(context, "context")
    return _check_template(template).format(context=", ".join(context))


def _check_template(template: str) -> str:
    if not isinstance(template, str):
        raise TypeError(f"`template` must be a string with a {{context}} field, got {template!r}.")
    fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    if fields != {"context"}:
        raise ValueError(
            f"`template` must have exactly one field, {{context}}, got fields {sorted(fields)} "
            f"in {template!r}."
        )
    return template


def synthetic_records(
    n_records: int,
    seed: int = 0,
    min_fragments: int = 5,
    max_fragments: int = 10,
    profile_weight: float = 12.0,
    second_profile: float = 0.3,
) -> list[list[str]]:
    """``n_records`` records of ``min_fragments..max_fragments`` distinct correlated fragments.

    Each record draws a main profile uniformly, and with probability ``second_profile`` another
    one; its size ``k`` is uniform in ``[min_fragments, max_fragments]``, and its fragments are
    drawn without replacement with weight ``profile_weight`` for conditions of its profiles and 1
    for the rest of :data:`PROFILES`. Deterministic given ``seed`` (own ``random.Random``).
    """
    n_records = require_int(n_records, "n_records", 1)
    seed = require_int(seed, "seed", 0)
    profile_weight = require_positive(profile_weight, "profile_weight")
    second_profile = require_probability(second_profile, "second_profile")
    min_fragments = require_int(min_fragments, "min_fragments", 2)
    max_fragments = require_int(max_fragments, "max_fragments", min_fragments)
    vocabulary = [c for conditions in PROFILES.values() for c in conditions]
    if max_fragments > len(vocabulary):
        raise ValueError(f"`max_fragments` must be <= {len(vocabulary)} (the vocabulary size).")
    if not profile_weight > 0 or not 0 <= second_profile <= 1:
        raise ValueError("`profile_weight` must be > 0 and `second_profile` in [0, 1].")
    rng = random.Random(seed)
    names = list(PROFILES)
    records = []
    for _ in range(n_records):
        chosen = {rng.choice(names)}
        if rng.random() < second_profile:
            chosen.add(rng.choice(names))
        favoured = {c for name in chosen for c in PROFILES[name]}
        weights = {c: profile_weight if c in favoured else 1.0 for c in vocabulary}
        k = rng.randint(min_fragments, max_fragments)
        record: list[str] = []
        for _ in range(k):  # weighted sampling without replacement
            pool = [c for c in vocabulary if c not in record]
            record.append(rng.choices(pool, weights=[weights[c] for c in pool])[0])
        records.append(record)
    return records


def record_texts(record: Sequence[str], template: str = PROMPT_TEMPLATE) -> list[str]:
    """One training text per fragment of ``record``: its prompt on the others, then the fragment.

    Fine-tuning a target on these texts shows it each fragment in the audit's own prompt format
    (the form in which :func:`build_attack_set` queries it); the order of the context is the
    record's. Use the same function for shadow and world models so the format cancels out.
    ``record`` is a list of >= 2 strings.
    """
    record = require_string_sequence(record, "record")
    if len(record) < 2:
        raise ValueError(
            f"`record` needs >= 2 fragments (one to predict, the others as context), got {record}."
        )
    return [
        fragment_prompt([*record[:j], *record[j + 1 :]], template) + fragment
        for j, fragment in enumerate(record)
    ]


def build_attack_set(
    members: Sequence[Sequence[str]],
    non_members: Sequence[Sequence[str]],
    n_unseen: int | None = None,
    unseen_fragments: Sequence[str] = UNSEEN_FRAGMENTS,
    seed: int = 0,
    template: str = PROMPT_TEMPLATE,
) -> AttackSet:
    """One query per record plus ``n_unseen`` unseen-fragment queries (default: ``len(members)``).

    For each member record (used in fine-tuning, label 1) and each non-member record (held out,
    label 0) a target fragment ``y`` is drawn uniformly and the record's other fragments, in
    order, form the context. Each unseen query (label 0) pairs the context of a random member
    record less one random fragment with a fragment of ``unseen_fragments`` (which must appear in
    no record). Deterministic given ``seed``.
    """
    if not members or not non_members:
        raise ValueError("Give at least one member and one non-member record.")
    seed = require_int(seed, "seed", 0)
    _check_template(template)
    members = [require_string_sequence(r, f"members[{i}]") for i, r in enumerate(members)]
    non_members = [
        require_string_sequence(r, f"non_members[{i}]") for i, r in enumerate(non_members)
    ]
    shared = Counter(map(tuple, members)) & Counter(map(tuple, non_members))
    if shared:
        raise ValueError(
            f"{sum(shared.values())} record(s) appear both in `members` and in `non_members`; "
            "a record is either used in fine-tuning or held out: remove the overlap."
        )
    unseen_fragments = require_string_sequence(unseen_fragments, "unseen_fragments")
    n_unseen = len(members) if n_unseen is None else require_int(n_unseen, "n_unseen", 0)
    seen = {f for record in (*members, *non_members) for f in record}
    unseen = list(unseen_fragments)
    if n_unseen and (not unseen or seen & set(unseen)):
        raise ValueError("`unseen_fragments` must be non-empty and appear in no record.")
    rng = random.Random(seed)
    prompts, fragments, labels, kinds, indices = [], [], [], [], []

    def add(record: Sequence[str], label: int, kind: str, index: int, y: str | None) -> None:
        if len(record) < 2:
            raise ValueError("Every record needs >= 2 fragments (a target and a context).")
        j = rng.randrange(len(record))
        prompts.append(fragment_prompt([*record[:j], *record[j + 1 :]], template))
        fragments.append(record[j] if y is None else y)
        labels.append(label)
        kinds.append(kind)
        indices.append(index)

    for i, record in enumerate(members):
        add(record, 1, "member", i, None)
    for i, record in enumerate(non_members):
        add(record, 0, "non_member", i, None)
    for _ in range(n_unseen):
        i = rng.randrange(len(members))
        add(members[i], 0, "unseen", i, rng.choice(unseen))
    return AttackSet(prompts, fragments, labels, kinds, indices)
