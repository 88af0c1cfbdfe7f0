"""Plug-in (conditional) mutual information of categorical data and MIIC's NML / BIC shifted
information ``infok``, the score of Lagrange & Isambert's search-and-score algorithm.

The reference (``miicTeam/miicsearchscore``, ``R/node_scoring.R``, ``R/edge_scoring.R``) scores
with ``miic::computeMutualInfo(x, y, df_conditioning = z)$infok`` on categorical data. In MIIC
(``miicTeam/miic_R_package``, ``src/``) that is, for ``n`` samples, natural logarithms and
counts ``n_xz`` (the number of rows with ``X = x, Z = z``, etc.):

- ``info = n I(X;Y|Z)``, the plug-in conditional mutual information in nats *times n*
  (``computeCondMutualInfoDiscrete`` in ``computation_discrete.cpp``: ``Hux + Huy - Hu - Huyx``
  with ``H.. = -sum n.. log n..``; ``computeMI`` in ``mutual_information.h`` for ``Z = {}``:
  ``n log n + Hu + Hx - Hux``):

      n I(X;Y|Z) = sum_{x,y,z} n_xyz log(n_xyz n_z / (n_xz n_yz)).                        (1)

- ``k``, the complexity, in the same units (nats, for the whole sample, not per sample). NML
  (MIIC's default), a sum over the observed configurations ``z`` of ``Z`` (one configuration,
  ``n_z = n``, when ``Z`` is empty, which is ``computeMI``'s ``flag == 0`` branch):

      k_NML = 1/2 [ sum_{x,z} log C(n_xz, r_y) - sum_z log C(n_z, r_y)
                  + sum_{y,z} log C(n_yz, r_x) - sum_z log C(n_z, r_x) ],                 (2)

  ``C(n, r)`` the multinomial NML normaliser (:func:`log_nml_normaliser`, ``CtermCache::getLogC``
  in ``computation_cache.cpp``) and ``r_x``, ``r_y`` the numbers of levels of ``X`` and ``Y`` in
  the whole data (not per stratum). BIC:

      k_BIC = 1/2 (r_x - 1)(r_y - 1) q_z log n,    q_z = prod_j r_{z_j},                  (3)

  with ``q_z`` the *product* of the levels of the conditioning columns, observed together or
  not (MIIC's ``fillHashList``), which is what the four BIC ``logC_*`` terms of
  ``computeCondMutualInfoDiscrete`` reduce to.

- ``infok = info - k`` (``mydiscretizeMutual`` in ``mdl_pair_discretize.cpp`` returns
  ``res.I - res.k``), with ``|info| < 1e-10`` and ``|k| < 1e-10`` set to 0
  (``getCondMutualInfo`` in ``get_information.cpp``), 0 when ``X`` or ``Y`` has a single level,
  and -- as ``computeMutualInfo`` leaves MIIC's ``negative_info`` at its default ``FALSE`` --
  ``info`` and ``k`` both set to 0 when ``Z`` is not empty and ``info - k < 0``: the conditional
  ``infok`` is ``max(0, n I - k)`` while the unconditional one can be negative.
  :func:`shifted_information` follows this (``negative_info=False``); ``negative_info=True``
  gives the raw ``n I - k``.

Where ours differs: MIIC approximates ``C(n, 2)`` for ``n > 1000`` by Szpankowski's expansion
``sqrt(n pi / 2) exp(sqrt(8 / (9 n pi)) + (3 pi - 16) / (36 n pi))``; we sum it exactly (in log
space) for every ``n`` -- the two differ by about ``5e-7`` in ``log C`` at ``n = 1001``, ``6e-10``
at ``n = 10^5``. ``X`` and ``Y`` may be joint variables (sequences of columns): they count as one
categorical variable whose levels are the observed joint configurations, as if the combined
column had been passed to ``computeMutualInfo``. Sample weights and ``n_eff`` are not supported
(MIIC's defaults, unit weights and ``n_eff = n``, are what the reference uses).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Sequence

import numpy as np
from scipy.special import gammaln, logsumexp, xlogy

from lightning_info.core.validation import require_bool

__all__ = [
    "METHODS",
    "InformationCache",
    "complexity",
    "conditional_mutual_information",
    "encode",
    "entropy",
    "log_nml_normaliser",
    "shifted_information",
]

METHODS = ("nml", "bic")
_PRECISION = 1e-10  # MIIC's kPrecision (get_information.cpp): |info|, |k| below it count as 0

Columns = int | Sequence[int]


# --------------------------------------------------------------------------- encoding


def _is_missing(value: object) -> bool:
    """True for ``None``, float NaN, ``pandas.NA`` / ``NaT`` (anything not equal to itself)."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except (TypeError, ValueError):  # pandas.NA: `NA != NA` is NA, whose truth value raises
        return True


def encode(
    columns, max_levels: int = 50, names: Sequence[str] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Integer-code an ``(n, m)`` table of categorical values, column by column.

    ``columns``: anything ``np.asarray`` turns into a 2-D array (a list of rows, a numpy array,
    a pandas DataFrame -- whose column names, or ``names``, then appear in the error messages) of
    ints, strings or other hashable values. Each column ``j`` becomes codes ``0..r_j - 1``
    (levels in sorted order, or in order of first appearance when the values cannot be sorted,
    as MIIC's
    ``factor(x, levels = unique(x))``; the order does not change any information).

    Returns ``(codes, levels)``: an ``(n, m)`` int64 array and the ``(m,)`` int64 level counts
    ``r_j``. Raises ``ValueError`` for missing values, fewer than 2 rows, a constant column or
    a column with more than ``max_levels`` distinct values.
    """
    if isinstance(max_levels, bool) or not isinstance(max_levels, int) or max_levels < 2:
        raise ValueError(f"`max_levels` must be an int >= 2, got {max_levels!r}.")
    names = [str(c) for c in (getattr(columns, "columns", []) if names is None else names)]
    table = np.asarray(columns)
    if table.ndim != 2:
        raise ValueError(
            f"`columns` must be a 2-D (n_samples, n_variables) table, got shape {table.shape}; "
            "pass a single variable as x.reshape(-1, 1)."
        )
    n, m = table.shape
    if m == 0:
        raise ValueError("`columns` has no column: pass at least one variable.")
    if n < 2:
        raise ValueError(
            f"`columns` has {n} row(s): information needs at least 2 samples (MIIC's "
            "computeMutualInfo requires 3 complete rows)."
        )
    if len(names) != m:
        names = [str(j) for j in range(m)]
    codes = np.empty((n, m), dtype=np.int64)
    levels = np.empty(m, dtype=np.int64)
    for j in range(m):
        column = table[:, j]
        if column.dtype.kind == "f" or column.dtype.kind == "c":
            missing = np.isnan(column)
        elif column.dtype.kind == "O":
            missing = np.fromiter((_is_missing(v) for v in column), dtype=bool, count=n)
        else:
            missing = np.zeros(n, dtype=bool)
        if missing.any():
            raise ValueError(
                f"column {names[j]!r} has {int(missing.sum())} missing value(s) (NaN/None): "
                "drop or impute those rows first (MIIC's computeMutualInfo drops incomplete rows)."
            )
        try:
            uniques, inverse = np.unique(column, return_inverse=True)
        except TypeError:  # unorderable mix of types: first-appearance order
            index: dict = {}
            inverse = np.fromiter(
                (index.setdefault(v, len(index)) for v in column), dtype=np.int64, count=n
            )
            uniques = np.empty(len(index), dtype=object)
        r = len(uniques)
        if r < 2:
            raise ValueError(
                f"column {names[j]!r} is constant (a single level, {column[0]!r}): it carries no "
                "information; drop it."
            )
        if r > max_levels:
            raise ValueError(
                f"column {names[j]!r} has {r} distinct values, more than max_levels={max_levels}: "
                "discretise it first if it is continuous, or raise `max_levels`."
            )
        codes[:, j] = inverse.reshape(n)
        levels[j] = r
    return codes, levels


# --------------------------------------------------------------------------- plug-in entropies


def _check_codes(codes) -> np.ndarray:
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[0] < 1:
        raise ValueError(
            f"`codes` must be a 2-D (n_samples, n_variables) array, got shape {codes.shape}; "
            "build it with encode()."
        )
    if codes.dtype.kind not in "iu":
        raise ValueError(f"`codes` must hold integers (got dtype {codes.dtype}): use encode().")
    if codes.size and codes.min() < 0:
        raise ValueError("`codes` must be non-negative level codes: use encode().")
    return codes


def _indices(value: Columns, m: int, name: str) -> tuple[int, ...]:
    """Column indices as a tuple: an int gives one column, a sequence a joint variable."""
    items = list(value) if isinstance(value, Iterable) else [value]
    out = []
    for item in items:
        if isinstance(item, (bool, np.bool_)):
            raise TypeError(f"`{name}` must hold column indices, got {item!r}.")
        try:
            index = operator.index(item)
        except TypeError:
            raise TypeError(f"`{name}` must hold integer column indices, got {item!r}.") from None
        if not 0 <= index < m:
            raise ValueError(f"`{name}` index {index} is out of range for {m} columns.")
        out.append(index)
    return tuple(out)


def _joint_codes(codes: np.ndarray, cols: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """Dense codes ``0..q-1`` of the observed joint configurations of ``cols``, and ``q``.

    Columns are folded in one at a time (``key * (max + 1) + column``) and re-densified with
    ``np.unique`` after each, so the key never exceeds ``n * max_level``: no overflow.
    """
    n = codes.shape[0]
    if not cols:
        return np.zeros(n, dtype=np.int64), 1
    key = codes[:, cols[0]].astype(np.int64)
    for c in cols[1:]:
        column = codes[:, c].astype(np.int64)
        key = key * (int(column.max()) + 1) + column
        key = np.unique(key, return_inverse=True)[1].reshape(n)
    uniques, key = np.unique(key, return_inverse=True)
    return key.reshape(n), len(uniques)


def _counts(codes: np.ndarray, cols: tuple[int, ...]) -> np.ndarray:
    """Counts of the observed joint configurations of ``cols`` (all > 0)."""
    key, q = _joint_codes(codes, cols)
    return np.bincount(key, minlength=q)


def _entropy_of_counts(counts: np.ndarray) -> float:
    """``H = log n - (1/n) sum_c c log c`` (nats), i.e. ``-sum p log p`` with ``p = c / n``."""
    n = counts.sum()
    return float(math.log(n) - np.sum(xlogy(counts, counts)) / n)


def _entropy(codes: np.ndarray, cols: tuple[int, ...]) -> float:
    return 0.0 if not cols else _entropy_of_counts(_counts(codes, cols))


def entropy(codes, columns: Columns = ()) -> float:
    """Plug-in joint entropy ``H(X_S) = -sum_s p(s) log p(s)`` in nats of the columns ``S``.

    ``p(s)`` is the empirical frequency of the joint configuration ``s`` of ``columns`` (an
    index or a sequence of indices into the coded matrix); ``columns=()`` gives 0.
    """
    codes = _check_codes(codes)
    return _entropy(codes, _indices(columns, codes.shape[1], "columns"))


def _cmi(codes: np.ndarray, x: tuple, y: tuple, z: tuple) -> float:
    return (
        _entropy(codes, x + z) + _entropy(codes, y + z) - _entropy(codes, x + y + z)
    ) - _entropy(codes, z)


def conditional_mutual_information(codes, x: Columns, y: Columns, z: Columns = ()) -> float:
    """Plug-in ``I(X;Y|Z) = H(X,Z) + H(Y,Z) - H(X,Y,Z) - H(Z)`` in nats (per sample).

    ``x``, ``y``, ``z``: a column index or a sequence of indices (a joint variable); ``z=()``
    gives ``I(X;Y)``. Equation (1) of the module docstring divided by ``n``.
    """
    codes = _check_codes(codes)
    x, y, z = _xyz(codes, x, y, z)
    return _cmi(codes, x, y, z)


def _xyz(codes: np.ndarray, x, y, z) -> tuple[tuple, tuple, tuple]:
    m = codes.shape[1]
    x, y, z = _indices(x, m, "x"), _indices(y, m, "y"), _indices(z, m, "z")
    if not x or not y:
        raise ValueError("`x` and `y` must each name at least one column.")
    return x, y, z


# --------------------------------------------------------------------------- NML normaliser


def _log_c2(n: int) -> float:
    """``log C(n, 2) = log sum_{k=0}^n binom(n, k) (k/n)^k ((n-k)/n)^(n-k)`` (``0^0 = 1``).

    Summed exactly in log space (``logsumexp`` of ``log binom + xlogy`` terms): the terms grow
    no larger than 1, so nothing overflows, and ``O(n)`` work; used for every ``n`` (MIIC
    switches to Szpankowski's asymptotic expansion above ``n = 1000``).
    """
    k = np.arange(n + 1, dtype=np.float64)
    rest = n - k
    log_terms = (
        gammaln(n + 1.0)
        - gammaln(k + 1.0)
        - gammaln(rest + 1.0)
        + xlogy(k, k / n)
        + xlogy(rest, rest / n)
    )
    return float(logsumexp(log_terms))


_LOG_C_TABLE: dict[int, list[float]] = {}
"""Cache: ``n -> [log C(n, 1), log C(n, 2), ...]``, extended on demand by the recursion."""


def log_nml_normaliser(n: int, r: int) -> float:
    """``log C(n, r)``, the normaliser of the NML distribution of an ``r``-ary multinomial.

        C(n, r) = sum_{h_1 + ... + h_r = n} n! / (h_1! ... h_r!) prod_k (h_k / n)^{h_k},

    ``C(n, 1) = 1``, ``C(n, 2)`` by the direct sum (:func:`_log_c2`) and, for ``r >= 1``, the
    recursion of Kontkanen & Myllymaki ("A linear-time algorithm for computing the multinomial
    stochastic complexity", Inf. Process. Lett. 103, 2007)

        C(n, r + 2) = C(n, r + 1) + (n / r) C(n, r),

    run in log space on the ratio ``rho_r = C(n, r) / C(n, r - 1)``,
    ``rho_r = 1 + n / ((r - 2) rho_{r-1})``, ``log C(n, r) = log C(n, r - 1) + log rho_r`` (as
    MIIC's ``CtermCache::getLogC`` does), so that ``C(n, r) ~ n^((r-1)/2)`` never overflows.
    ``n = 0`` gives 0 (as MIIC). Results are cached per ``n``.
    """
    if isinstance(n, bool) or isinstance(r, bool):
        raise TypeError("`n` and `r` must be ints.")
    n, r = operator.index(n), operator.index(r)
    if n < 0 or r < 1:
        raise ValueError(f"need n >= 0 and r >= 1, got n={n}, r={r}.")
    if n == 0 or r == 1:
        return 0.0
    table = _LOG_C_TABLE.get(n)
    if table is None:
        table = _LOG_C_TABLE[n] = [0.0, _log_c2(n)]
    while len(table) < r:
        level = len(table) + 1  # the r being computed, >= 3
        rho_prev = math.exp(table[-1] - table[-2])
        table.append(table[-1] + math.log1p(n / ((level - 2) * rho_prev)))
    return table[r - 1]


def _sum_log_c(counts: np.ndarray, r: int) -> float:
    """``sum_c log C(c, r)`` over the cell counts, each distinct count computed once."""
    values, multiplicity = np.unique(counts, return_counts=True)
    return float(sum(int(k) * log_nml_normaliser(int(v), r) for v, k in zip(values, multiplicity)))


# --------------------------------------------------------------------------- MIIC's complexity


def _complexity(codes: np.ndarray, x: tuple, y: tuple, z: tuple, method: str) -> float:
    n = codes.shape[0]
    r_x = _joint_codes(codes, x)[1]
    r_y = _joint_codes(codes, y)[1]
    if method == "bic":  # equation (3)
        q_z = math.prod(_joint_codes(codes, (c,))[1] for c in z)
        return 0.5 * (r_x - 1) * (r_y - 1) * q_z * math.log(n)
    n_z = _counts(codes, z)  # equation (2)
    return 0.5 * (
        _sum_log_c(_counts(codes, x + z), r_y)
        - _sum_log_c(n_z, r_y)
        + _sum_log_c(_counts(codes, y + z), r_x)
        - _sum_log_c(n_z, r_x)
    )


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {METHODS}, got {method!r}.")
    return method


def complexity(codes, x: Columns, y: Columns, z: Columns = (), method: str = "nml") -> float:
    """MIIC's complexity ``k_{X;Y|Z}`` in nats for the whole sample (the units of ``n I``).

    ``method="nml"``: equation (2) of the module docstring, a sum over the observed
    configurations of ``Z``; ``"bic"``: equation (3), ``(r_x - 1)(r_y - 1) q_z log(n) / 2``.
    Symmetric in ``x`` and ``y``; 0 when ``X`` or ``Y`` has a single level.
    """
    codes = _check_codes(codes)
    x, y, z = _xyz(codes, x, y, z)
    return _complexity(codes, x, y, z, _check_method(method))


def _shifted(
    codes: np.ndarray, x: tuple, y: tuple, z: tuple, method: str, negative_info: bool
) -> float:
    n = codes.shape[0]
    if _joint_codes(codes, x)[1] <= 1 or _joint_codes(codes, y)[1] <= 1:
        return 0.0  # MIIC's getCondMutualInfo: a variable with one level has info = k = 0
    info = n * _cmi(codes, x, y, z)  # equation (1)
    k = _complexity(codes, x, y, z, method)
    info = 0.0 if abs(info) < _PRECISION else info
    k = 0.0 if abs(k) < _PRECISION else k
    if z and not negative_info and info - k < 0:
        return 0.0  # MIIC's computeCondMutualInfoDiscrete with negative_info = FALSE
    return info - k


def shifted_information(
    codes,
    x: Columns,
    y: Columns,
    z: Columns = (),
    method: str = "nml",
    negative_info: bool = False,
) -> float:
    """MIIC's ``infok = n I(X;Y|Z) - k_{X;Y|Z}`` in nats for the whole sample (not per sample).

    As ``miic::computeMutualInfo(x, y, df_conditioning = z, cplx = method)$infok``: equation
    (1) minus :func:`complexity`, both zeroed below ``1e-10`` in absolute value; 0 when ``X``
    or ``Y`` has one level; clipped at 0 when ``z`` is not empty unless ``negative_info``
    (MIIC's default ``negative_info = FALSE``). With ``z`` empty it may be negative.
    """
    codes = _check_codes(codes)
    x, y, z = _xyz(codes, x, y, z)
    return _shifted(
        codes, x, y, z, _check_method(method), require_bool(negative_info, "negative_info")
    )


# --------------------------------------------------------------------------- memoisation


class InformationCache:
    """Memoised :func:`shifted_information` on one coded data set, as the reference's hash table.

    The key is ``(sorted (x, y) pair, sorted z)`` (x and y each a sorted tuple of columns), so
    ``(x, y, z)`` and ``(y, x, permuted z)`` share an entry -- ``infok`` is symmetric in ``X``,
    ``Y`` and does not depend on the order of ``Z``. ``hits`` and ``misses`` count lookups.
    """

    def __init__(self, codes, method: str = "nml", negative_info: bool = False) -> None:
        self.codes = _check_codes(codes)
        self.method = _check_method(method)
        self.negative_info = require_bool(negative_info, "negative_info")
        self.hits = 0
        self.misses = 0
        self._values: dict[tuple, float] = {}

    def key(self, x: Columns, y: Columns, z: Columns = ()) -> tuple:
        """The cache key of ``(x, y, z)``: ``(tuple(sorted((sorted x, sorted y))), sorted z)``."""
        x, y, z = _xyz(self.codes, x, y, z)
        return tuple(sorted((tuple(sorted(x)), tuple(sorted(y))))), tuple(sorted(z))

    def __call__(self, x: Columns, y: Columns, z: Columns = ()) -> float:
        """``shifted_information(codes, x, y, z, method, negative_info)``, memoised."""
        key = self.key(x, y, z)
        value = self._values.get(key)
        if value is not None:
            self.hits += 1
            return value
        self.misses += 1
        (x, y), z = key
        value = _shifted(self.codes, x, y, z, self.method, self.negative_info)
        self._values[key] = value
        return value

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: tuple) -> bool:
        return key in self._values

    def clear(self) -> None:
        """Forget every value and reset the counters."""
        self._values.clear()
        self.hits = self.misses = 0
