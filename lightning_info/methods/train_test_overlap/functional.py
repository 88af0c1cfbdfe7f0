"""Train-test overlap: exact n-gram statistics between a training corpus and test instances.

Implements the per-instance overlap metrics of HELM's ``scripts/data_overlap`` (the standard
implementation behind Zhang et al., ICML 2025, "Language model developers should report
train-test overlap", Algorithm 1), re-written for speed and exactness:

- tokenizers: ``"default"`` is HELM's ``re.split(r"[\\s{punct}]+", text.lower())``, which keeps
  the empty strings at the edges (``"models."`` ends with a ``""`` token); ``"light"`` is
  ``str.split()``; ``"janitor"`` is the GPT-3 / lm-eval Janitor normalisation (lower case,
  punctuation removed, whitespace split); ``"character"`` makes every character a token (lower
  case, whitespace runs made one space), for text without spaces and for short items.
- an instance whose text yields no ``n``-gram (fewer than ``n`` tokens in its input, in each
  reference and across the two; a sentence without spaces is one word token) cannot be seen in
  any training data and scores 0, as in HELM: the report lists such instances
  (``OverlapReport.undetectable``, ``num_undetectable`` per benchmark) and building the index
  warns (``UndetectableInstancesWarning``) with a few ids and the way to see them.
- each test instance indexes the n-grams of its input, of each reference, and of its
  *intersections* (the last ``n - 1`` input tokens followed by the first ``n - 1`` tokens of each
  reference: the n-grams that straddle the prompt/answer boundary);
- scanning the training documents counts, exactly, how often each indexed n-gram occurs;
- at ``N = n`` each part (input, references) gets HELM's metrics, each unfiltered and with the
  frequency filter (n-grams seen more than ``max_frequency`` times count as unmatched):

  * ``binary``: 1 if any n-gram of the part occurs in training;
  * ``jaccard``: ``#matched n-grams / #n-grams`` (n-grams counted with repetition);
    ``jaccard_weighted`` sums ``1 / count`` instead of 1;
  * ``token``: fraction of tokens inside a matched n-gram; ``token_weighted`` weights each
    covered token by ``1 / c`` with ``c`` the smallest count in its run of matched n-grams.
    With the filter, a frequent n-gram still extends a run that a rare one started (HELM's rule).

  References are scored on the references joined by a space, as HELM does; n-grams that straddle
  two references were not indexed and count as unmatched. Parts shorter than ``n`` tokens have
  no n-gram and score 0 (HELM divides by zero there).

Exactness. N-grams are sequences of 64-bit symbols: with a built-in tokenizer each token's exact
key (``encoding.py``: a token of at most 8 bytes is its bytes, a longer one a hash verified word
by word against the test token it claims to be), with a custom tokenizer its id in the *test*
vocabulary (0 for every other token). A symbol that no test token has separates documents, so
no window across two can match. Each n-gram gets a 64-bit polynomial hash computed with numpy
over ``uint64`` (wrap-around arithmetic, by doubling); training windows are looked up among the
hashes of the test n-grams (a ``HashTable``), and every candidate hit is then **verified symbol
by symbol** against the test n-gram it claims to be, so a hash collision can never produce a
false match. Distinct test n-grams with equal hashes are detected when the index is built and
the hash base is redrawn. Counts are therefore exact: no Bloom filter, no false positives.

Streaming. Training documents are read from any iterable (a list, a generator over files, a
``datasets.Dataset`` column) in chunks of ``chunk_size`` documents; memory is bounded by a few
chunks. Built-in tokenizers encode a whole chunk at once (``encoding.py``); custom ones go token
by token. ``threads > 1`` counts chunks in a thread pool (numpy releases the GIL);
``processes > 1`` in a process pool (worth its start-up cost on large corpora only); the default
is this thread. What is measured (``n``, ``n_values``, ``tokenizer``, ``max_frequency``) and how
the corpus is scanned (``chunk_size``, ``processes``, ``threads``, ``progress``) is one
:class:`OverlapOptions`, shared by :func:`compute_overlap`, :class:`OverlapIndex`, the sharded
scans, the command line and the ``TrainTestOverlap`` Callback.

Other methodologies: :func:`substring_overlap` (GPT-4: three random 50-character substrings of
each instance, seeded) and :func:`llama2_contamination` (Llama 2: fraction of tokens inside
matched n-grams of length >= 10; clean below 20%, dirty above 80%).
"""

from __future__ import annotations

import math
import numbers
import re
import string
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice, repeat
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from lightning_info.core.validation import require_bool, require_int
from lightning_info.methods.train_test_overlap.batches import TextBatch
from lightning_info.methods.train_test_overlap.encoding import (
    END_KEY,
    VECTORISED_TOKENIZERS,
    HashTable,
    TokenTable,
    character_symbols,
    character_tokenize,
    encode_keys,
)
from lightning_info.methods.train_test_overlap.engine import (
    ENGINES,
    CompiledScanner,
    SymbolGroup,
    compiled_available,
)
from lightning_info.methods.train_test_overlap.report import (
    OverlapReport,
    UndetectableInstancesWarning,
    undetectable_message,
)

__all__ = [
    "check_overlap_options",
    "ChunkCounts",
    "compute_overlap",
    "contaminated_documents",
    "default_tokenize",
    "janitor_tokenize",
    "light_tokenize",
    "METRICS",
    "ngram_metrics",
    "NgramIndex",
    "OverlapIndex",
    "OverlapOptions",
    "PARTS",
    "reject_bare_text",
    "resolve_tokenizer",
    "summarize",
    "TestInstance",
    "token_overlap",
    "TOKENIZERS",
]

_DEFAULT_SPLIT = re.compile(rf"[\s{re.escape(string.punctuation)}]+")
_PUNCT_TABLE = str.maketrans("", "", string.punctuation)


def default_tokenize(text: str) -> list[str]:
    """HELM's ``DefaultTokenizer``: lower case, split on runs of whitespace and punctuation.

    Empty strings at the edges are kept (``"(a)"`` -> ``["", "a", ""]``), exactly as HELM does.
    """
    return _DEFAULT_SPLIT.split(text.lower())


def light_tokenize(text: str) -> list[str]:
    """HELM's ``LightTokenizer``: ``text.split()``."""
    return text.split()


def janitor_tokenize(text: str) -> list[str]:
    """GPT-3 / lm-eval Janitor normalisation: lower case, punctuation removed, whitespace split."""
    return text.lower().translate(_PUNCT_TABLE).split()


TOKENIZERS: dict[str, Callable[[str], list[str]]] = {
    "default": default_tokenize,
    "light": light_tokenize,
    "janitor": janitor_tokenize,
}
"""The word tokenizers by name; ``"character"`` (:func:`~.encoding.character_tokenize`) is the
fourth name :class:`OverlapOptions` takes."""
_VECTORISED = {TOKENIZERS[name]: name for name in VECTORISED_TOKENIZERS}
_BY_NAME = {**TOKENIZERS, "character": character_tokenize}

PARTS = ("input", "references")
_KINDS = ("binary", "jaccard", "jaccard_weighted", "token", "token_weighted")
METRICS = tuple(
    f"{part}_{kind}{suffix}" for part in PARTS for suffix in ("", "_filtered") for kind in _KINDS
) + (
    "intersection_binary",
    "any_overlap",
)
"""Per-instance metric names of a report, at ``N = n``."""


@dataclass(frozen=True)
class TestInstance:
    """One test instance: its ``input``, its ``references`` and the benchmark it belongs to.

    ``references`` is a sequence of strings (``()`` for none); a bare string is rejected.
    """

    __test__ = False  # not a pytest class

    id: str
    input: str
    references: tuple[str, ...] = ()
    benchmark: str = "default"

    def __post_init__(self) -> None:
        if isinstance(self.id, bool) or not isinstance(self.id, (str, int)):
            raise TypeError(f"`id` must be a string (or an int), got {self.id!r}.")
        if not isinstance(self.benchmark, str):
            raise TypeError(
                f"instance {self.id!r}: `benchmark` must be a string, got {self.benchmark!r}."
            )
        if not isinstance(self.input, str):
            raise TypeError(f"instance {self.id!r}: `input` must be a string, got {self.input!r}.")
        refs = self.references
        if isinstance(refs, (str, bytes)):
            raise TypeError(
                f"instance {self.id!r}: `references` must be a sequence of strings, got the bare "
                f"string {refs!r}; wrap it in a list: references=[{refs!r}]."
            )
        if not isinstance(refs, Iterable):
            raise TypeError(
                f"instance {self.id!r}: `references` must be a sequence of strings, got "
                f"{refs!r}; pass () for an instance without references."
            )
        refs = tuple(refs)
        if not all(isinstance(r, str) for r in refs):
            raise TypeError(f"instance {self.id!r}: `references` must be strings, got {refs!r}.")
        object.__setattr__(self, "references", refs)


def resolve_tokenizer(name: str | Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """The tokenizer called ``name`` (a key of ``TOKENIZERS`` or ``"character"``), or ``name``
    itself when it is a callable."""
    if callable(name):
        return name
    if not isinstance(name, str) or name not in _BY_NAME:
        raise ValueError(
            f"`tokenizer` must be one of {sorted(_BY_NAME)} or a callable, got {name!r}."
        )
    return _BY_NAME[name]


@dataclass(frozen=True)
class OverlapOptions:
    """What the overlap report measures and how the training corpus is scanned.

    Args:
        n: the ``N`` of the full metrics (module docstring).
        n_values: n-gram sizes at which binary input/reference overlap is also reported
            (``input_overlap@5`` ...); ``n`` is always one of them.
        tokenizer: ``"default"``, ``"light"``, ``"janitor"``, ``"character"`` (module
            docstring) or a callable from a text to its tokens. ``"character"`` counts
            character n-grams (choose ``n`` in characters: about 50 for English, 13 for
            Chinese); ``num_tokens`` of the report then counts characters.
        max_frequency: the filtered metrics count n-grams seen more than this many times in
            training as unmatched.
        chunk_size: training documents read and counted at a time (memory is bounded by a few
            chunks).
        processes, threads: worker processes or threads counting chunks (not both).
        progress: show a progress bar of the documents scanned.
        engine: the inner loops: ``"compiled"`` (numba, the ``overlap`` extra: one pass over
            the bytes of a chunk and one over its symbols), ``"numpy"`` (vectorised numpy, no
            compiled dependency) or ``"auto"`` (compiled when numba imports). Both count
            exactly the same.
    """

    n: int = 13
    n_values: tuple[int, ...] = (5, 9, 13)
    tokenizer: str | Callable[[str], list[str]] = "default"
    max_frequency: int = 10
    chunk_size: int = 1000
    processes: int = 1
    threads: int = 1
    progress: bool = False
    engine: str = "auto"

    def __post_init__(self) -> None:
        require_int(self.n, "n", 1)
        if isinstance(self.n_values, (str, bytes)) or not isinstance(self.n_values, Iterable):
            raise TypeError(
                f"`n_values` must be a tuple of ints, got {self.n_values!r}; pass e.g. (5, 9, 13), "
                "or () for none."
            )
        values = tuple(require_int(m, "n_values", 1) for m in self.n_values)
        object.__setattr__(self, "n_values", values)
        resolve_tokenizer(self.tokenizer)
        require_int(self.max_frequency, "max_frequency", 0)
        require_int(self.chunk_size, "chunk_size", 1)
        require_int(self.processes, "processes", 1)
        require_int(self.threads, "threads", 1)
        if self.processes > 1 and self.threads > 1:
            raise ValueError("pass `processes` or `threads`, not both (each worker counts chunks).")
        require_bool(self.progress, "progress")
        if self.engine not in ENGINES:
            raise ValueError(
                f"`engine` must be one of {ENGINES}, got {self.engine!r}; 'auto' takes the "
                "compiled scan when numba is installed (pip install 'lightning-info[overlap]')."
            )


def check_overlap_options(options: OverlapOptions) -> OverlapOptions:
    """``options``, or raise unless it is an :class:`OverlapOptions`."""
    if not isinstance(options, OverlapOptions):
        raise TypeError(
            f"`options` must be an OverlapOptions, got {type(options).__name__}; pass e.g. "
            "OverlapOptions(n=5, n_values=(5,))."
        )
    return options


def _windows_hash(ids: np.ndarray, n: int, base: np.uint64) -> np.ndarray:
    """``h_i = sum_j ids[i + j] * base^(n - 1 - j) mod 2^64`` for every window of ``n`` ids.

    By doubling: the hashes of windows of ``2^k`` ids give those of ``2^(k+1)``
    (``h_{a+b}(i) = h_a(i) * base^b + h_b(i + a)``, exact in wrap-around arithmetic), and the
    binary digits of ``n`` are added from the largest, so about ``2 log2(n)`` passes over the ids
    instead of ``2 n``."""
    count = ids.size - n + 1
    if count <= 0:
        return np.empty(0, dtype=np.uint64)
    ids = np.asarray(ids, dtype=np.uint64)
    powers = [ids]  # powers[k]: hashes of the windows of 2^k ids
    while 2 ** len(powers) <= n:
        width, previous = 2 ** (len(powers) - 1), powers[-1]
        size = previous.size - width
        h = np.multiply(previous[:size], _power(base, width))
        h += previous[width : width + size]
        powers.append(h)
    h, width = None, 0  # the windows of the largest binary digits of n summed so far
    for k in range(len(powers) - 1, -1, -1):
        step = 2**k
        if not n & step:
            continue
        if h is None:  # the hashes of 2^k ids are ours to overwrite, except the ids themselves
            h, width = (powers[k][:count] if k else ids[:count].copy()), step
            continue
        np.multiply(h, _power(base, step), out=h)
        h += powers[k][width : width + count]
        width += step
    return h


def _power(base: np.uint64, exponent: int) -> np.uint64:
    return np.uint64(pow(int(base), exponent, 1 << 64))


def _all_windows(sequences: Sequence[np.ndarray], n: int) -> np.ndarray:
    """Every window of ``n`` ids of every sequence, ``(windows, n)``, without one numpy call per
    sequence: the windows of the concatenation that start ``>= n - 1`` ids before a sequence's
    end."""
    if not sequences:
        return np.empty((0, n), np.uint64)
    joined = np.concatenate([np.asarray(s, dtype=np.uint64) for s in sequences])
    lengths = np.fromiter(map(len, sequences), np.int64, len(sequences))
    count = np.maximum(lengths - n + 1, 0)
    offsets = np.cumsum(lengths) - lengths
    starts = np.arange(count.sum()) + np.repeat(offsets - (np.cumsum(count) - count), count)
    if starts.size == 0:
        return np.empty((0, n), np.uint64)
    return np.lib.stride_tricks.sliding_window_view(joined, n)[starts]


def _integer_sequences(sequences: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``sequences`` as 1-D integer arrays, or raise (a float id would be truncated)."""
    if isinstance(sequences, (str, bytes)) or (
        isinstance(sequences, np.ndarray) and sequences.ndim < 2
    ):
        raise TypeError(
            "`sequences` must be a list of 1-D integer arrays (one per text), got "
            f"{type(sequences).__name__}; wrap a single sequence in a list: [ids]."
        )
    arrays = []
    for k, sequence in enumerate(sequences):
        array = sequence if isinstance(sequence, np.ndarray) else np.asarray(sequence)
        if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
            raise TypeError(
                f"`sequences[{k}]` must be a 1-D array of integer ids, got shape "
                f"{array.shape} and dtype {array.dtype}; map tokens to ids first."
            )
        arrays.append(array)
    return arrays


class NgramIndex:
    """The distinct n-grams of a set of symbol sequences (``uint64`` token ids or keys), to be
    counted in training text.

    ``grams[k]`` is the k-th distinct n-gram (its symbols), ``hashes`` their sorted 64-bit hashes
    (distinct by construction); :meth:`count` gives each one's occurrences in a token sequence.
    """

    def __init__(self, sequences: Sequence[np.ndarray], n: int, seed: int = 0) -> None:
        self.n = require_int(n, "n", 1)
        seed = require_int(seed, "seed", 0)
        rows = _all_windows(_integer_sequences(sequences), n)
        rng = np.random.default_rng(seed)
        for _ in range(8):  # a collision among the test n-grams has probability ~ k^2 / 2^64
            self.base = np.uint64(rng.integers(1 << 32, 1 << 62) | 1)
            hashes = _windows_hash(rows.reshape(-1), n, self.base)[::n]
            self.hashes, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
            self.grams = rows[first]
            if (self.grams[inverse] == rows).all():  # equal hashes only for equal n-grams
                break
        else:
            raise RuntimeError("distinct test n-grams kept sharing a 64-bit hash; report this bug.")
        self._lookup = HashTable(self.hashes, np.arange(self.hashes.size), distinct=True)
        # Each n-gram as one opaque item of 8 n bytes: a window is verified by one comparison.
        self._items = np.ascontiguousarray(self.grams, dtype=np.uint64).view(f"V{8 * n}")[:, 0]

    def __len__(self) -> int:
        return len(self.grams)

    def lookup(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Window positions of ``ids`` that are indexed n-grams (verified exactly), and which."""
        h = _windows_hash(ids, self.n, self.base)
        if h.size == 0 or len(self) == 0:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        candidates, slot = self._lookup.find(h)
        ids = np.ascontiguousarray(ids, dtype=np.uint64)
        windows = np.ndarray(h.shape, dtype=self._items.dtype, buffer=ids, strides=(8,))
        exact = windows[candidates] == self._items[slot]  # rule out hash collisions
        return candidates[exact], slot[exact]

    def count(self, ids: np.ndarray) -> np.ndarray:
        """Occurrences of each indexed n-gram in ``ids`` (a bincount of verified hits)."""
        return np.bincount(self.lookup(ids)[1], minlength=len(self))


def token_overlap(counts: Sequence[int], n: int, max_frequency: int = 0) -> tuple[float, float]:
    """HELM's token overlap of one part from the training counts of its n-grams, in order.

    Returns ``(unweighted, weighted)``: the fraction of the part's tokens covered by a matched
    n-gram, and the same with each covered token weighted by ``1 / c`` (``c`` the smallest count
    in the current run of matched n-grams). With ``max_frequency > 0`` a matched n-gram starts a
    run only if its count is ``<= max_frequency``, but extends a run already under way whatever
    its count. ``len(counts) + n - 1`` tokens; no n-gram gives ``(0, 0)``.
    """
    require_int(n, "n", 1)
    require_int(max_frequency, "max_frequency", 0)
    return _token_overlap(
        counts if isinstance(counts, list) else np.asarray(counts).tolist(), n, max_frequency
    )


def _token_overlap(counts: list[int], n: int, max_frequency: int) -> tuple[float, float]:
    """:func:`token_overlap` of checked arguments."""
    if len(counts) == 0:
        return 0.0, 0.0
    covered, weighted, weight, budget = 0, 0.0, 0, 0
    for c in counts:
        if c != 0 and (max_frequency == 0 or c <= max_frequency or 0 < weight <= max_frequency):
            budget = n
            weight = min(c, weight) if weight > 0 else c
        if budget > 0:
            budget -= 1
            covered += 1
            weighted += 1 / weight
        else:
            weight = 0
    for _ in range(n - 1):  # the trailing tokens of the last n-gram
        if budget > 0:
            budget -= 1
            covered += 1
            weighted += 1 / weight
    total = len(counts) + n - 1
    return covered / total, weighted / total


def ngram_metrics(counts: Sequence[int], n: int, max_frequency: int = 0) -> dict[str, float]:
    """Binary, Jaccard and token overlap (HELM) of one part from the counts of its n-grams."""
    require_int(n, "n", 1)
    require_int(max_frequency, "max_frequency", 0)
    # a part is short: Python beats numpy calls
    c = counts if isinstance(counts, list) else np.asarray(counts, dtype=np.int64).tolist()
    return _ngram_metrics(c, n, max_frequency)


_NO_OVERLAP = dict.fromkeys(_KINDS, 0.0)


def _ngram_metrics(c: list[int], n: int, max_frequency: int) -> dict[str, float]:
    """:func:`ngram_metrics` of checked arguments (a list of counts)."""
    if not any(c):  # most parts of a clean test set: every metric is 0
        return dict(_NO_OVERLAP)
    valid = [x for x in c if x > 0 and (max_frequency == 0 or x <= max_frequency)]
    total = len(c)
    token, token_weighted = _token_overlap(c, n, max_frequency)
    return {
        "binary": float(bool(valid)),
        "jaccard": len(valid) / total if total else 0.0,
        "jaccard_weighted": math.fsum(1.0 / x for x in valid) / total if total else 0.0,
        "token": token,
        "token_weighted": token_weighted,
    }


class _Vocabulary:
    """Token -> id (from 1) over the test tokens; every other token is 0."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def add(self, tokens: list[str]) -> np.ndarray:
        ids = self.ids
        new = [t for t in dict.fromkeys(tokens) if t not in ids]  # in order of first appearance
        ids.update(zip(new, range(len(ids) + 1, len(ids) + 1 + len(new))))
        return np.fromiter(map(ids.__getitem__, tokens), np.uint64, len(tokens))

    def encode_documents(self, documents: Sequence[list[str]]) -> np.ndarray:
        """All documents' ids in one array, each followed by a 0 so n-grams never span two."""
        get, zeros = self.ids.get, repeat(0)
        flat: list[int] = []
        for tokens in documents:
            flat.extend(map(get, tokens, zeros))
            flat.append(0)
        return np.array(flat, dtype=np.uint64)


def reject_bare_text(value: Any, name: str) -> None:
    if isinstance(value, (str, bytes, bytearray)):
        raise TypeError(
            f"`{name}` must be an iterable of strings, got a single {type(value).__name__} "
            f"(each character would count as one of the {name}); wrap it in a list: [text]."
        )


def _chunks(documents: Iterable[str] | Iterable[TextBatch], size: int) -> Iterator[list[str]]:
    """``documents`` in lists of ``size`` (the last one shorter), or, when they are
    :class:`~.batches.TextBatch` es (``text_batches.read_text_batches``), each batch as it is;
    their type is checked where they are counted."""
    if isinstance(documents, list):
        if documents and isinstance(documents[0], TextBatch):
            yield from documents
            return
        for start in range(0, len(documents), size):
            yield documents[start : start + size]
        return
    iterator = iter(documents)
    first = list(islice(iterator, 1))
    if first and isinstance(first[0], TextBatch):
        yield first[0]
        yield from iterator
        return
    while chunk := first + list(islice(iterator, size - len(first))):
        first = []
        yield chunk


_WORKER: dict[str, Any] = {}


def _init_worker(index: OverlapIndex) -> None:
    _WORKER["index"] = index


def _count_chunk(chunk: list[str]) -> ChunkCounts:
    return _WORKER["index"].count_chunk(chunk)


@dataclass
class ChunkCounts:
    """Exact counts of every indexed n-gram (one array per ``n``) in some documents, and their
    number of documents and tokens. Counts of disjoint document sets add up (``+``)."""

    counts: list[np.ndarray]
    documents: int
    tokens: int

    def __add__(self, other: ChunkCounts) -> ChunkCounts:
        if not isinstance(other, ChunkCounts):
            return NotImplemented
        if _shapes(self) != _shapes(other):
            raise ValueError(
                "these counts come from two different overlap indexes (other n-gram sizes or "
                "test instances); count every chunk with one OverlapIndex."
            )
        counts = [a + b for a, b in zip(self.counts, other.counts)]
        return ChunkCounts(counts, self.documents + other.documents, self.tokens + other.tokens)


def _shapes(counts: ChunkCounts) -> list[tuple[int, ...]]:
    return [np.shape(c) for c in counts.counts]


def _check_counts(total: object) -> ChunkCounts:
    """``total``, or raise unless it is a :class:`ChunkCounts` of integer counts ``>= 0`` (a
    float, negative or hand-edited count would give fractional or negative n-gram hits)."""
    if not isinstance(total, ChunkCounts):
        raise TypeError(
            f"`total` must be a ChunkCounts (from OverlapIndex.count_chunk), got "
            f"{type(total).__name__}."
        )
    for name, value in (("documents", total.documents), ("tokens", total.tokens)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
            raise TypeError(f"`total.{name}` must be an int, got {value!r}.")
        if value < 0:
            raise ValueError(f"`total.{name}` must be >= 0, got {value!r}.")
    for position, count in enumerate(total.counts):
        count = np.asarray(count)
        if count.dtype.kind not in "iu":
            raise TypeError(
                f"`total.counts[{position}]` must hold integer counts, got dtype {count.dtype}."
            )
        if count.size and count.min() < 0:
            raise ValueError(
                f"`total.counts[{position}]` holds a negative count ({int(count.min())}); "
                "counts come from OverlapIndex.count_chunk and are >= 0."
            )
    return total


class OverlapIndex:
    """The test side of the overlap report: the test vocabulary, every instance's token ids and
    one :class:`NgramIndex` per n-gram size.

    :meth:`count_chunk` counts a chunk of training documents (a pure function of the chunk, so
    chunks can be counted anywhere: in order, in worker processes, in ``datasets.map`` shards or
    on a cluster) and :meth:`report` turns the summed :class:`ChunkCounts` into the HELM metrics.
    ``options``: ``n``, ``n_values``, ``tokenizer`` and ``max_frequency`` of an
    :class:`OverlapOptions` (the scan fields are the caller's).

    ``undetectable`` lists the instances without any indexed ``n``-gram (``{"benchmark",
    "id"}``), found once here; building an index with any warns
    (``UndetectableInstancesWarning``). Instance ids must be unique within a benchmark (the
    report's rows are keyed by them).
    """

    def __init__(
        self, instances: Sequence[TestInstance], options: OverlapOptions = OverlapOptions()
    ) -> None:
        options = check_overlap_options(options)
        n, tokenizer = options.n, options.tokenizer
        self.n = n
        self.n_values = tuple(sorted({*options.n_values, n}))
        self.max_frequency = options.max_frequency
        self.tokenize = resolve_tokenizer(tokenizer)
        self.tokenizer_name = (
            tokenizer if isinstance(tokenizer, str) else getattr(tokenizer, "__name__", "custom")
        )
        instances = _check_instances(instances)
        self.instances = instances
        tokenize, texts = self.tokenize, []
        for instance in instances:  # per instance: input, references, joined references
            texts += [instance.input, *instance.references, " ".join(instance.references)]
        tokenized: dict[str, list[str]] = {}  # one reference: its text is the joined one
        tokens = [
            tokenized[text] if text in tokenized else tokenized.setdefault(text, tokenize(text))
            for text in texts
        ]
        self.vocab = _Vocabulary()
        ids = self.vocab.add([token for part in tokens for token in part])
        # The n-grams are counted over symbols: the tokens' exact keys with a built-in
        # tokenizer (``encode_keys``; no id lookup per training token), a character's code
        # point + 1 with ``"character"`` (``character_symbols``), else the ids.
        name = _VECTORISED.get(tokenize)
        table = TokenTable(self.vocab.ids, name) if name is not None else None
        self.table = table if table is not None and table.unique else None
        symbols = ids if self.table is None else self.table.key_of_id[ids]
        self.characters = tokenize is character_tokenize
        if self.characters:
            flat = "".join(token for part in tokens for token in part)
            symbols = np.frombuffer(flat.encode("utf-32-le", "surrogatepass"), "<u4")
            symbols = symbols.astype(np.uint64) + np.uint64(1)
        self.separator = np.uint64(0 if self.table is None else END_KEY)  # in no n-gram
        ends = np.cumsum(np.fromiter(map(len, tokens), np.int64, len(tokens))).tolist()
        pieces = [symbols[start:end] for start, end in zip([0, *ends], ends)]
        self.parts = []  # per instance: input, [references], joined references (symbols)
        at = 0
        for instance in instances:
            count = len(instance.references)
            self.parts.append((pieces[at], pieces[at + 1 : at + 1 + count], pieces[at + 1 + count]))
            at += count + 2
        self.undetectable = [
            {"benchmark": instance.benchmark, "id": instance.id}
            for instance, (inp, refs, _) in zip(instances, self.parts)
            if not _has_ngram(n, inp, refs)
        ]
        if self.undetectable:
            message = undetectable_message(
                self.undetectable, len(instances), n, self.tokenizer_name
            )
            warnings.warn(message, UndetectableInstancesWarning, stacklevel=2)
        self.indexes = []
        for m in self.n_values:
            sequences = []
            for inp, refs, _ in self.parts:
                sequences += [inp, *refs, *_intersections(m, inp, refs)]
            self.indexes.append(NgramIndex(sequences, m))
        compiled = options.engine == "compiled" or (
            options.engine == "auto" and compiled_available()
        )
        self.scanner = (
            CompiledScanner(self.table, self.indexes, self.separator) if compiled else None
        )

    def count_chunk(self, documents: list[str] | TextBatch) -> ChunkCounts:
        """Exact counts of every indexed n-gram in ``documents`` (strings, or a
        :class:`~.batches.TextBatch`)."""
        counts = [np.zeros(len(index), np.int64) for index in self.indexes]
        tokens = 0
        for group in self._symbol_groups(documents):
            tokens += group.tokens
            for m, index in enumerate(self.indexes):
                if self.scanner is not None:
                    self.scanner.count(m, group.symbols, counts[m])
                else:
                    counts[m] += index.count(group.symbols)
        return ChunkCounts(counts, len(documents), tokens)

    def _symbol_groups(self, documents: list[str] | TextBatch) -> list[SymbolGroup]:
        """The documents as :class:`~.engine.SymbolGroup` s: the compiled engine's groups
        with a built-in word tokenizer, else one group per encoding group
        (:func:`_encoding_groups`) of :meth:`_symbols`."""
        groups: list[SymbolGroup] = []
        if self.scanner is not None and self.table is not None:
            groups, texts, positions = self.scanner.keyed_groups(documents)
        else:
            texts = documents.texts() if isinstance(documents, TextBatch) else documents
            positions = np.arange(len(texts))
        if len(texts) == 0:
            return groups
        for group in _encoding_groups(texts):
            symbols, tokens, ends = self._symbols([texts[i] for i in group])
            groups.append(SymbolGroup(symbols, tokens, positions[group], ends))
        return groups

    def flag_chunk(self, documents: list[str], n: int | None = None) -> np.ndarray:
        """For each of ``documents``, whether it holds any indexed test n-gram of size ``n``
        (default: the index's ``n``; one of its ``n_values``): an n-gram of an input, of a
        reference, or straddling an input and one of its references. These are the training
        examples a decontamination step removes. Exact, as the counts."""
        n = self.n if n is None else require_int(n, "n", 1)
        if n not in self.n_values:
            raise ValueError(f"`n` = {n} is not indexed; build the index with it in `n_values`.")
        flags = np.zeros(len(documents), dtype=bool)
        m = self.n_values.index(n)
        index = self.indexes[m]
        for group in self._symbol_groups(documents):
            found = np.zeros(group.positions.size, dtype=bool)
            if self.scanner is not None and group.ends is None:
                self.scanner.flag(m, group.symbols, np.zeros(len(index), np.int64), found)
            else:
                ends = group.ends
                if ends is None:
                    ends = np.flatnonzero(group.symbols == self.separator)
                positions, _ = index.lookup(group.symbols)
                found[np.searchsorted(ends, positions)] = True
            flags[group.positions[found]] = True
        return flags

    def _symbols(self, documents: list[str]) -> tuple[np.ndarray, int, np.ndarray]:
        """Every token's symbol, each document's followed by the separator; the number of
        tokens; the position of each document's separator. With a built-in tokenizer the chunk
        is encoded by :func:`encode_keys` (every token's exact key, without a Python string per
        token; ASCII documents first; the end-of-document key is no token's); otherwise, or when
        that path declines the chunk, token by token, in order (an unknown token's id is the
        separator's, so the ends come from the documents' lengths); with ``"character"`` by
        :func:`character_symbols`."""
        encoded = encode_keys(documents, self.table) if self.table is not None else None
        if encoded is not None:
            symbols, num_tokens = encoded
            return symbols, num_tokens, np.flatnonzero(symbols == self.separator)
        if not all(map(isinstance, documents, repeat(str))):
            kinds = sorted({type(d).__name__ for d in documents if not isinstance(d, str)})
            raise TypeError(f"training documents must be strings, got {', '.join(kinds)}.")
        if self.characters:
            return character_symbols(documents)
        tokens = [self.tokenize(d) for d in documents]
        ids = self.vocab.encode_documents(tokens)
        symbols = ids if self.table is None else self.table.key_of_id[ids]
        lengths = np.fromiter(map(len, tokens), np.int64, len(tokens))
        return symbols, int(lengths.sum()), np.cumsum(lengths + 1) - 1

    def empty_counts(self) -> ChunkCounts:
        return ChunkCounts([np.zeros(len(index), np.int64) for index in self.indexes], 0, 0)

    def report(self, total: ChunkCounts) -> OverlapReport:
        """The HELM metrics of every instance from the counts of the whole training corpus."""
        total = _check_counts(total)
        if total.documents == 0:
            raise ValueError("the training corpus is empty: pass at least one document.")
        if _shapes(total) != _shapes(self.empty_counts()):
            raise ValueError(
                "these counts do not come from this index (other n-gram sizes or test "
                "instances); count the chunks with this index's `count_chunk`."
            )
        n, max_frequency, indexes = self.n, self.max_frequency, self.indexes
        counts = total.counts
        report = OverlapReport(
            n, self.n_values, self.tokenizer_name, max_frequency, total.documents, total.tokens
        )
        # Per n, every part's windows in one array: each window's slot (-1: not indexed).
        per_index = []  # per n: window counts (0 where not indexed), parts' window ranges, any hit
        for m, index, count in zip(self.n_values, indexes, counts):
            sequences = [
                seq
                for inp, refs, joined in self.parts
                for seq in (inp, joined, *refs, *_intersections(m, inp, refs))
            ]
            slots, starts, sizes = _slot_array(index, sequences, self.separator)
            window_counts = np.append(count, 0)[slots]  # slot -1 reads the appended 0
            seen = np.concatenate([[0], np.cumsum(window_counts > 0)])
            hit = (seen[starts + sizes] > seen[starts]).tolist()
            per_index.append((window_counts, starts.tolist(), sizes.tolist(), slots, hit))
        main = self.n_values.index(n)
        window_counts, starts, sizes, slots, _ = per_index[main]
        filters = (("", 0), ("_filtered", max_frequency))
        at = {m: 0 for m in self.n_values}  # each n's first sequence of the current instance
        for instance, (_, refs, _) in zip(self.instances, self.parts):
            row: dict[str, Any] = {"benchmark": instance.benchmark, "id": instance.id}
            first, r = at[n], len(refs)
            spans = [(starts[q], starts[q] + sizes[q]) for q in range(first, first + 2 + r)]
            (a, b), (ja, jb), *ref_spans = spans
            own = set(slots[ref_spans[0][0] : ref_spans[-1][1]].tolist()) if r else set()
            joined = [
                c if s in own else 0
                for s, c in zip(slots[ja:jb].tolist(), window_counts[ja:jb].tolist())
            ]
            for part, part_counts in (
                ("input", window_counts[a:b].tolist()),
                ("references", joined),
            ):
                for suffix, f in filters:
                    for kind, value in _ngram_metrics(part_counts, n, f).items():
                        row[f"{part}_{kind}{suffix}"] = value
            for m, (*_, hit) in zip(self.n_values, per_index):
                q, inter = at[m], r if m >= 2 else 0
                row[f"input_overlap@{m}"] = float(hit[q])
                row[f"references_overlap@{m}"] = float(any(hit[q + 2 : q + 2 + r]))
                row[f"intersection_overlap@{m}"] = float(any(hit[q + 2 + r : q + 2 + r + inter]))
                at[m] = q + 2 + r + inter
            row["intersection_binary"] = row[f"intersection_overlap@{n}"]
            row["any_overlap"] = float(
                row["input_binary"] > 0
                or row["references_binary"] > 0
                or row["intersection_binary"] > 0
            )
            report.rows.append(row)
        report.summary = summarize(report.rows)
        report.undetectable = [dict(item) for item in self.undetectable]
        for benchmark, stats in report.summary.items():
            missing = sum(item["benchmark"] == benchmark for item in self.undetectable)
            report.summary[benchmark] = {
                "num_instances": stats.pop("num_instances"),
                "num_undetectable": missing,
                **stats,
            }
        return report


def _check_instances(instances: Sequence[TestInstance]) -> list[TestInstance]:
    """``instances`` as a list, or raise unless it is a non-empty sequence of
    :class:`TestInstance` with ids unique within each benchmark (the report's rows are keyed
    by them)."""
    if isinstance(instances, TestInstance):
        raise TypeError("`instances` must be a sequence of TestInstance; wrap the one: [instance].")
    if isinstance(instances, (str, bytes, Path)):
        raise TypeError(
            f"`instances` must be a sequence of TestInstance, got {instances!r}; read a file of "
            "them with read_test_instances(path)."
        )
    instances = list(instances)
    if not instances:
        raise ValueError("no test instances: pass at least one TestInstance.")
    if not all(isinstance(i, TestInstance) for i in instances):
        raise TypeError("`instances` must be TestInstance objects (see `read_test_instances`).")
    seen: set[tuple[str, Any]] = set()
    repeated = []
    for instance in instances:
        key = (instance.benchmark, instance.id)
        if key in seen:
            repeated.append(f"{instance.benchmark}/{instance.id}")
        seen.add(key)
    if repeated:
        raise ValueError(
            f"test instance ids must be unique within a benchmark; repeated: "
            f"{', '.join(repeated[:5])}{' ...' if len(repeated) > 5 else ''}. Give each "
            "instance its own id, or put the copies in another benchmark."
        )
    return instances


def _has_ngram(n: int, inp: np.ndarray, refs: list[np.ndarray]) -> bool:
    """Whether an instance's parts hold any ``n``-gram: its input, a reference, or the
    ``n - 1`` tokens on each side of an input/reference boundary (:func:`_intersections`)."""
    if len(inp) >= n or any(len(r) >= n for r in refs):
        return True
    edge = min(len(inp), n - 1)
    return n >= 2 and any(edge + min(len(r), n - 1) >= n for r in refs)


def _intersections(m: int, inp: np.ndarray, refs: list[np.ndarray]) -> list[np.ndarray]:
    """The ``m``-grams that straddle the input/reference boundary, one sequence per reference."""
    if m < 2:
        return []
    return [np.concatenate([inp[-(m - 1) :], r[: m - 1]]) for r in refs]


def compute_overlap(
    instances: Sequence[TestInstance],
    documents: Iterable[str],
    options: OverlapOptions = OverlapOptions(),
) -> OverlapReport:
    """Exact train-test n-gram overlap of ``instances`` against training ``documents``.

    ``options`` (:class:`OverlapOptions`): ``n`` is the N of the full metrics (see the module
    docstring); ``n_values`` are the n-gram sizes at which binary input/reference overlap is also
    reported (``input_overlap@5`` ...). ``documents`` is consumed once, ``chunk_size`` documents
    at a time, so memory is bounded by a few chunks whatever the corpus size; ``progress`` shows
    a bar of documents scanned. ``threads > 1`` counts chunks in that many threads (numpy
    releases the GIL for most of the work, a Python tokenizer holds it; see the card for what
    they gain); ``processes > 1`` in worker processes (worth their start-up on large corpora
    only).
    """
    options = check_overlap_options(options)
    reject_bare_text(documents, "documents")
    index = OverlapIndex(instances, options)
    total = len(documents) if isinstance(documents, Sized) else None
    counts = index.empty_counts()
    bar = tqdm(total=total, desc="overlap scan", unit="doc", disable=not options.progress)
    try:
        chunks = _chunks(documents, options.chunk_size)
        workers = _count_chunks(index, chunks, options.processes, options.threads)
        for chunk_counts in workers:
            counts = counts + chunk_counts
            bar.update(chunk_counts.documents)
    finally:
        bar.close()
    return index.report(counts)


def contaminated_documents(
    instances: Sequence[TestInstance],
    documents: Iterable[str],
    options: OverlapOptions = OverlapOptions(),
) -> np.ndarray:
    """A boolean per training document: does it share an ``options.n``-gram with any test
    instance (its input, a reference, or across the two)? Exact, streamed ``chunk_size`` documents
    at a time; the flagged documents are what a decontamination step drops from a training set
    before fine-tuning on it (the counts of :func:`compute_overlap` say which *test* instances
    leaked; this says which *training* examples carry them)."""
    options = check_overlap_options(options)
    reject_bare_text(documents, "documents")
    index = OverlapIndex(instances, options)
    flags = [index.flag_chunk(chunk) for chunk in _chunks(documents, options.chunk_size)]
    return np.concatenate(flags) if flags else np.zeros(0, dtype=bool)


def _encoding_groups(documents: list[str]) -> list[list[int]]:
    """Positions of ``documents`` in groups that :func:`encode_keys` encodes in their own order:
    the ASCII ones and the others (a non-string is left to the encoder to refuse)."""
    flags = [not isinstance(d, str) or d.isascii() for d in documents]
    ascii_group = [i for i, flag in enumerate(flags) if flag]
    others = [i for i, flag in enumerate(flags) if not flag]
    return [group for group in (ascii_group, others) if group]


def _count_chunks(
    index: OverlapIndex, chunks: Iterator[list[str]], processes: int, threads: int
) -> Iterator[ChunkCounts]:
    """``index.count_chunk`` of every chunk, in order, in this thread or in ``threads`` threads /
    ``processes`` processes with at most two chunks per worker in flight (a pool's ``map``
    would read the whole corpus ahead)."""
    if processes == threads == 1:
        yield from map(index.count_chunk, chunks)
        return
    if processes > 1:  # the index travels once per worker; chunks of text travel to them
        spawn = get_context("spawn")
        executor: Executor = ProcessPoolExecutor(
            processes, mp_context=spawn, initializer=_init_worker, initargs=(index,)
        )
        count, workers = _count_chunk, processes
    else:
        executor, count, workers = ThreadPoolExecutor(threads), index.count_chunk, threads
    with executor:
        pending: deque[Future[ChunkCounts]] = deque()
        for chunk in chunks:
            pending.append(executor.submit(count, chunk))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _slot_array(
    index: NgramIndex, sequences: list[np.ndarray], separator: np.uint64
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The index slot of every window of the sequences (-1: not indexed), in one pass over the
    sequences joined by ``separator`` (a symbol in no indexed n-gram): the sequence ``q`` has
    its ``sizes[q]`` windows at ``starts[q]`` of the returned slots."""
    gap = np.full(1, separator, dtype=np.uint64)
    pieces = [x for seq in sequences for x in (seq, gap)]
    ids = np.concatenate(pieces) if pieces else np.empty(0, np.uint64)
    slots = np.full(max(ids.size - index.n + 1, 0), -1, dtype=np.int64)
    positions, found = index.lookup(ids)
    slots[positions] = found
    lengths = np.fromiter(map(len, sequences), np.int64, len(sequences))
    starts = np.minimum(np.cumsum(lengths + 1) - (lengths + 1), slots.size)  # past: no window
    return slots, starts, np.maximum(lengths - index.n + 1, 0)


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per benchmark: ``num_instances`` and the mean of every numeric per-instance metric.

    ``rows`` is a list of per-instance dicts, each with a ``"benchmark"``; the metrics averaged
    are the float values of a benchmark's first row, which every row of it must hold."""
    if isinstance(rows, (str, bytes, dict)) or not isinstance(rows, Iterable):
        raise TypeError(
            f"`rows` must be a list of per-instance dicts, got {type(rows).__name__}; wrap a "
            "single row in a list: [row]."
        )
    rows = list(rows)
    for k, row in enumerate(rows):
        if not isinstance(row, dict) or "benchmark" not in row:
            raise ValueError(f"`rows[{k}]` must be a dict with a 'benchmark' key, got {row!r:.80}.")
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row["benchmark"], []).append(row)
    summary = {}
    for benchmark, members in groups.items():
        stats: dict[str, float] = {"num_instances": len(members)}
        for key, value in members[0].items():
            if isinstance(value, float):
                missing = [r.get("id", i) for i, r in enumerate(members) if key not in r][:3]
                if missing:
                    raise ValueError(
                        f"benchmark {benchmark!r}: rows {missing} lack the metric {key!r} of its "
                        "first row; give every row of a benchmark the same metrics."
                    )
                stats[key] = math.fsum(r[key] for r in members) / len(members)
        summary[benchmark] = stats
    return summary
