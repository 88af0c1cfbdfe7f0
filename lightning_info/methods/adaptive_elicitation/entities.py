"""Entities as a table of answers, and the three sources the data module reads them from.

An :class:`EntityTable` is ``questions`` (their texts), ``answer_names`` (the answer set shared by
every question) and ``answers (N, Q)``: entity ``n``'s answer to question ``q`` as an index into
``answer_names``, or ``-1`` where the entity has no answer. The sources:

- :func:`latent_world_table`: entities of a :class:`~.world.LatentTypeWorld` (every question
  answered; the latent types kept as ``labels``).
- :func:`digits_table`: scikit-learn's bundled handwritten digits (1,797 entities, nothing
  downloaded). The 8x8 image is cut into square regions; question ``r`` is "Region r dark?"
  and the answer is ``Yes`` when the region's mean ink (pixels / 16) is at least ``threshold``;
  "Is it a k?" questions give the digit class as yes/no answers. The class is also ``labels``.
  With ``shifts`` each image is also moved by whole pixels (:func:`shift_images`, blank pixels
  moved in) before the questions are answered: one entity per image and shift, the
  augmentation the data module applies to training images only.
- :func:`read_entities_jsonl`: a user's JSON lines, one entity per line,
  ``{"answers": {"question text": "answer", ...}}`` (other keys are ignored). Questions are
  ordered by first appearance; the answer set is ``answer_names`` when given, else the answers
  in order of first appearance. An answer is a string, number or boolean, named by its text
  (``1`` -> ``"1"``, ``true`` -> ``"True"``); every answer to one question has one JSON type, so
  ``1`` and ``"1"`` never merge silently. ``null`` is refused: leave the question out instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from lightning_info.core.files import read_json_lines
from lightning_info.core.validation import (
    require_bool,
    require_fraction,
    require_index,
    require_indices,
    require_int,
    require_string_sequence,
)
from lightning_info.methods.adaptive_elicitation.functional import check_index
from lightning_info.methods.adaptive_elicitation.world import LatentTypeWorld

__all__ = [
    "EntityTable",
    "digit_shifts",
    "digits_questions",
    "digits_table",
    "latent_world_questions",
    "latent_world_table",
    "read_entities_jsonl",
    "shift_images",
]

MISSING = -1


@dataclass(frozen=True)
class EntityTable:
    """``answers (N, Q)`` long, ``-1`` where unanswered; ``labels (N,)`` or ``None``."""

    questions: list[str]
    answer_names: list[str]
    answers: Tensor
    labels: Tensor | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "questions", require_string_sequence(self.questions, "questions"))
        names = require_string_sequence(self.answer_names, "answer_names")
        if len(set(names)) != len(names):
            raise ValueError(f"`answer_names` must be distinct, got {names!r}")
        object.__setattr__(self, "answer_names", names)
        for name, tensor in (("answers", self.answers), ("labels", self.labels)):
            if tensor is None:
                continue
            if not isinstance(tensor, Tensor):
                raise TypeError(
                    f"`{name}` must be a tensor of integer indices, got {type(tensor).__name__}; "
                    "pass torch.tensor(..., dtype=torch.long)"
                )
            if tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool:
                raise TypeError(
                    f"`{name}` must hold integer indices (torch.long), got {tensor.dtype}: a cast "
                    "would truncate 0.5 to 0 and read True as 1"
                )
        if self.labels is not None and tuple(self.labels.shape) != (self.answers.shape[0],):
            raise ValueError(
                f"`labels` must hold one label per entity, shape ({self.answers.shape[0]},), got "
                f"{tuple(self.labels.shape)}"
            )
        if self.answers.dim() != 2 or self.answers.shape[1] != len(self.questions):
            raise ValueError(
                f"answers must be (entities, {len(self.questions)} questions), "
                f"got {tuple(self.answers.shape)}"
            )
        if self.answers.shape[0] == 0:
            raise ValueError("no entities")
        if len(set(self.questions)) != len(self.questions):
            raise ValueError("question texts must be distinct")
        bad = (self.answers < MISSING) | (self.answers >= len(self.answer_names))
        if bool(bad.any()):
            raise ValueError(
                f"answers must be indices into the {len(self.answer_names)} answer names or -1"
            )

    @property
    def num_answers(self) -> int:
        return len(self.answer_names)

    def blocks(self, entity: int, questions: Sequence[int] | None = None) -> list[tuple[int, int]]:
        """The entity's ``(question, answer)`` pairs in the order of ``questions`` (default:
        all), skipping the unanswered ones."""
        row = self.answers[require_index(entity, "entity", self.answers.shape[0])]
        size = len(self.questions)
        order = range(size) if questions is None else questions
        if questions is not None:
            for q in questions:
                require_index(q, "questions entry", size)
        return [(int(q), int(row[q])) for q in order if int(row[q]) != MISSING]


def latent_world_questions(num_questions: int) -> list[str]:
    """The question texts of the latent-type world: short, so that a small LM trained from
    scratch reads the question from one or two tokens."""
    return [f"Trait {q}?" for q in range(num_questions)]


def latent_world_table(world: LatentTypeWorld, count: int, seed: int = 0) -> EntityTable:
    """``count`` entities of ``world`` (``world.sample_entities``), their types as labels."""
    if not isinstance(world, LatentTypeWorld):
        raise TypeError(
            f"`world` must be a LatentTypeWorld, got {type(world).__name__}; build one with "
            "LatentTypeWorld.sample(...)"
        )
    count = require_int(count, "count", 1)
    types, answers = world.sample_entities(count, seed=require_int(seed, "seed", 0))
    names = [f"A{a}" for a in range(world.num_answers)]
    return EntityTable(latent_world_questions(world.num_questions), names, answers, types)


def digits_questions(
    region: int = 2, class_questions: bool = True, regions: Sequence[int] | None = None
) -> list[str]:
    """The question texts of :func:`digits_table`: "Region r dark?" for the ``(8 / region)^2``
    regions (or only ``regions``, in that order), then "Is it a k?" for the ten classes when
    ``class_questions``."""
    kept = _digit_regions(region, regions)
    questions = [f"Region {r} dark?" for r in kept]
    return questions + ([f"Is it a {k}?" for k in range(10)] if class_questions else [])


def _digit_regions(region: int, regions: Sequence[int] | None) -> list[int]:
    region = require_int(region, "region", 1)
    if 8 % region:
        raise ValueError(f"region must divide the digits' 8 pixels, got {region}")
    count = (8 // region) ** 2
    if regions is None:
        return list(range(count))
    for r in regions:
        check_index(r, "regions entry", count)
    kept = [int(r) for r in regions]
    if not kept or len(set(kept)) != len(kept):
        raise ValueError(f"regions must be distinct indices in 0..{count - 1}, got {regions!r}")
    return kept


def shift_images(images: Tensor, down: int, right: int) -> Tensor:
    """``images (..., H, W)`` moved ``down`` rows and ``right`` columns (negative: up, left).
    Pixels moved past the edge are dropped and the ones moved in are 0 (blank), not wrapped
    around as ``torch.roll`` would."""
    height, width = images.shape[-2:]
    for name, value, size in (("down", down, height), ("right", right, width)):
        if not isinstance(value, int) or isinstance(value, bool) or not -size < value < size:
            raise ValueError(f"{name} must be an int in ({-size}, {size}), got {value!r}")
    out = torch.zeros_like(images)
    rows = slice(max(down, 0), height + min(down, 0)), slice(max(-down, 0), height + min(-down, 0))
    cols = (
        slice(max(right, 0), width + min(right, 0)),
        slice(max(-right, 0), width + min(-right, 0)),
    )
    out[..., rows[0], cols[0]] = images[..., rows[1], cols[1]]
    return out


def digits_table(
    region: int = 2,
    threshold: float = 0.5,
    class_questions: bool = True,
    images: Sequence[int] | Tensor | None = None,
    shifts: Sequence[tuple[int, int]] = ((0, 0),),
    regions: Sequence[int] | None = None,
) -> EntityTable:
    """scikit-learn's digits as entities of yes/no "Region r dark?" questions (module
    docstring); ``region`` divides 8, regions are numbered row-major. With
    ``class_questions`` the questions "Is it a k?" (``k = 0..9``) follow the regions: the digit
    class as yes/no targets. ``images`` picks which of the 1,797 images (default: all, in
    order); ``shifts`` lists ``(down, right)`` pixel shifts: entity ``s * len(images) + i`` is
    image ``images[i]`` shifted by ``shifts[s]`` (:func:`shift_images`). ``regions`` keeps only
    those region questions, in that order (default: all)."""
    from sklearn.datasets import load_digits

    class_questions = require_bool(class_questions, "class_questions")
    questions = digits_questions(region, class_questions, regions)
    threshold = require_fraction(threshold, "threshold")
    shifts = digit_shifts(shifts)
    features, labels = load_digits(return_X_y=True)
    pixels = torch.tensor(features / 16.0).view(-1, 8, 8)
    labels_t = torch.as_tensor(labels)
    if images is not None:
        picked = require_indices(images, "images")  # ints only: no bool mask, no 1.5
        if picked.numel() == 0 or bool((picked >= len(features)).any()):
            raise ValueError(f"images must be a non-empty set of indices in 0..{len(features) - 1}")
        pixels, labels_t = pixels[picked], labels_t[picked]
    pixels = torch.cat([shift_images(pixels, down, right) for down, right in shifts])
    labels_t = labels_t.repeat(len(shifts))
    side = 8 // region
    ink = pixels.view(-1, side, region, side, region).mean(dim=(2, 4)).reshape(-1, side * side)
    answers = (ink >= threshold).long()[:, _digit_regions(region, regions)]  # 1 = Yes
    if class_questions:
        answers = torch.cat([answers, (labels_t[:, None] == torch.arange(10)).long()], dim=1)
    return EntityTable(questions, ["No", "Yes"], answers, labels_t)


def digit_shifts(shifts: Sequence[Sequence[int]]) -> tuple[tuple[int, int], ...]:
    """``shifts`` as distinct ``(down, right)`` int pairs, each within ``-7..7``; refused
    otherwise."""
    try:
        pairs = [tuple(pair) for pair in shifts]
    except TypeError:
        pairs = None
    if (
        not pairs
        or any(len(pair) != 2 for pair in pairs)
        or any(
            not isinstance(v, int) or isinstance(v, bool) or abs(v) > 7 for p in pairs for v in p
        )
    ):
        raise ValueError(
            "shifts must be a non-empty list of (down, right) int pairs within -7..7, "
            f"got {shifts!r}"
        )
    if len(set(pairs)) != len(pairs):
        raise ValueError(f"shifts must be distinct, got {shifts!r}")
    return tuple(pairs)


def read_entities_jsonl(path: str | Path, answer_names: Sequence[str] | None = None) -> EntityTable:
    """A user's entities from JSON lines (module docstring). ``answer_names``, when given, is
    a list of distinct strings (a bare string is refused, not read letter by letter)."""
    if answer_names is not None:
        answer_names = require_string_sequence(answer_names, "answer_names")
        repeated = sorted({a for a in answer_names if answer_names.count(a) > 1})
        if repeated:
            raise ValueError(f"`answer_names` repeats {repeated}; name each answer once.")
    questions: dict[str, int] = {}
    names = {a: i for i, a in enumerate(answer_names or [])}
    rows: list[dict[int, int]] = []
    kinds: dict[str, tuple[str, int]] = {}
    for number, record in read_json_lines(path):
        given = record.get("answers") if isinstance(record, dict) else None
        if not isinstance(given, dict) or not given:
            raise ValueError(
                f"{path}:{number}: each line needs a non-empty "
                '"answers": {"question": "answer", ...} object'
            )
        row = {}
        for question, value in given.items():
            kind = _answer_kind(value, path, number, question)
            first_kind, first_line = kinds.setdefault(question, (kind, number))
            if kind != first_kind:
                raise ValueError(
                    f"{path}:{number}: question {question!r} has the {kind} answer {value!r}, "
                    f"but line {first_line} gave it a {first_kind}; give every answer to one "
                    'question the same JSON type (e.g. quote them all: "1").'
                )
            answer = str(value)
            if answer not in names:
                if answer_names is not None:
                    raise ValueError(
                        f"{path}:{number}: answer {answer!r} is not one of {list(answer_names)}"
                    )
                names[answer] = len(names)
            row[questions.setdefault(question, len(questions))] = names[answer]
        rows.append(row)
    if not rows:
        raise ValueError(f"{path} holds no entities")
    answers = torch.full((len(rows), len(questions)), MISSING, dtype=torch.long)
    for n, row in enumerate(rows):
        for q, a in row.items():
            answers[n, q] = a
    return EntityTable(list(questions), list(names), answers)


def _answer_kind(value, path, number: int, question: str) -> str:
    if value is None:
        raise ValueError(
            f"{path}:{number}: question {question!r} has the answer null; leave the question "
            "out of this entity's answers to mark it unanswered, or give the answer as a string."
        )
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    raise ValueError(
        f"{path}:{number}: question {question!r} has the answer {value!r}; an answer is a "
        "string, number or boolean."
    )
