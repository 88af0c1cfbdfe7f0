"""The fine-tuning pipeline's bundled corpus: FisherSFT's docstring instruction pool with test
items copied into it (planted contamination), and PRISM's synthetic records as canaries that every
arm trains on.

Everything ships with Python or is generated; nothing is downloaded.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from lab.fisher_sft.docstrings import docstring_splits
from lightning_info.core.files import atomic_write_text
from lightning_info.core.validation import require_int
from lightning_info.lm.corpus import instruction_dataset
from lightning_info.methods.prism.fragments import AttackSet, build_attack_set, synthetic_records

__all__ = ["CORPUS_FILES", "write_planted_sft_corpus"]

CORPUS_FILES = {
    "pool": "pool.jsonl",
    "test_set": "test.jsonl",
    "always_train": "canary_examples.jsonl",
    "canaries": "canaries.json",
}
"""The files :func:`write_planted_sft_corpus` writes, by role."""

SEPARATOR = "\n"
"""What joins prompt and response in training
(:func:`~lightning_info.lm.features.tokenize_prompt_response`); a canary query ends with it, so
that the audit scores exactly the text the model was trained on."""


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    atomic_write_text(path, "".join(json.dumps(row) + "\n" for row in rows))


def write_planted_sft_corpus(
    out_dir: str | Path,
    *,
    split_seed: int = 0,
    pool_size: int | None = None,
    test_size: int | None = None,
    contaminated: int = 20,
    canaries: int = 40,
    non_members: int | None = None,
    seed: int = 0,
) -> dict[str, Path]:
    """Write :data:`CORPUS_FILES` to ``out_dir``; their paths by role.

    - the test set: the held-out docstrings of
      :func:`~lab.fisher_sft.docstrings.docstring_splits` ("Explain <name>."
      -> docstring; other modules than the pool's), the first ``test_size`` (``None``: all);
      a ``planted`` field says which were copied into the pool;
    - the pool: the fine-tuning docstrings (the first ``pool_size``) and ``contaminated`` test
      items copied verbatim; a ``source`` field says ``docstring`` or ``contaminated``;
      shuffled with ``seed``;
    - the canary examples (``always_train``: trained by every arm, whatever the selection), one
      per canary record: a synthetic record
      (:func:`~lightning_info.methods.prism.fragments.synthetic_records`) with one of its
      fragments as the response and the others as the prompt's context, ``source`` ``canary``;
    - the canaries' attack set (:func:`~lightning_info.methods.prism.fragments.build_attack_set`):
      the planted queries (members), ``non_members`` records never planted (``None``: as many
      as ``canaries``) and ``canaries`` fragments of no record (unseen), in the training format
      (the query is the example's prompt and separator, then its fragment).
    """
    split_seed = require_int(split_seed, "split_seed", 0)
    seed = require_int(seed, "seed", 0)
    contaminated = require_int(contaminated, "contaminated", 0)
    canaries = require_int(canaries, "canaries", 1)
    non_members = canaries if non_members is None else require_int(non_members, "non_members", 1)
    _, pool_pairs, test_pairs = docstring_splits(split_seed)
    if pool_size is not None:
        pool_pairs = pool_pairs[: require_int(pool_size, "pool_size", 1)]
    if test_size is not None:
        test_pairs = test_pairs[: require_int(test_size, "test_size", 1)]
    if contaminated > len(test_pairs):
        raise ValueError(f"contaminated={contaminated} exceeds the {len(test_pairs)} test items.")
    rng = random.Random(seed)
    tests = instruction_dataset(test_pairs, seed=split_seed)
    planted = set(rng.sample(range(len(tests)), contaminated))
    test_rows = [
        {"prompt": row["prompt"], "response": row["response"], "planted": j in planted}
        for j, row in enumerate(tests)
    ]
    records = synthetic_records(canaries + non_members, seed=seed)
    drawn = build_attack_set(records[:canaries], records[canaries:], seed=seed)
    attack = AttackSet(
        [p.rstrip() + SEPARATOR for p in drawn.prompts],
        drawn.fragments,
        drawn.labels,
        drawn.kinds,
        drawn.records,
    )
    pool_rows = [
        {"prompt": row["prompt"], "response": row["response"], "source": "docstring"}
        for row in instruction_dataset(pool_pairs, seed=split_seed)
    ]
    pool_rows += [{**test_rows[j], "source": "contaminated"} for j in sorted(planted)]
    for row in pool_rows:
        row.pop("planted", None)
    rng.shuffle(pool_rows)
    canary_rows = [
        {"prompt": p.rstrip(), "response": f, "source": "canary"}
        for p, f, kind in zip(attack.prompts, attack.fragments, attack.kinds)
        if kind == "member"
    ]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {role: out / name for role, name in CORPUS_FILES.items()}
    _write_jsonl(paths["pool"], pool_rows)
    _write_jsonl(paths["test_set"], test_rows)
    _write_jsonl(paths["always_train"], canary_rows)
    attack.save(paths["canaries"])
    return paths
