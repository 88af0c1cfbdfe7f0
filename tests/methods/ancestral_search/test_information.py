"""Plug-in entropies and (conditional) mutual information against exact tables, scipy and
sklearn; the NML normaliser against brute-force sums and its asymptotic expansion; MIIC's
complexity and shifted information ``infok`` against its count-form definitions; the cache and
the encoder's errors."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.stats
from sklearn.metrics import mutual_info_score

from lightning_info.methods.ancestral_search.information import (
    InformationCache,
    complexity,
    conditional_mutual_information,
    encode,
    entropy,
    log_nml_normaliser,
    shifted_information,
)


def _random_codes(n=400, seed=0):
    """Columns x (3 levels), y (2), z1 (3), z2 (2), w (4) with dependencies between them."""
    rng = np.random.default_rng(seed)
    z1 = rng.integers(0, 3, n)
    z2 = rng.integers(0, 2, n)
    x = (z1 + (rng.random(n) < 0.3) * rng.integers(0, 3, n)) % 3
    y = (x + z2 * (rng.random(n) < 0.3)) % 2
    w = (x + rng.integers(0, 2, n) * 2) % 4
    return np.stack([x, y, z1, z2, w], axis=1)


# --------------------------------------------------------------------------- entropy


@pytest.mark.parametrize("k", [2, 3, 5, 7])
def test_entropy_of_an_exactly_balanced_column_is_log_k(k):
    column = np.random.default_rng(k).permutation(np.repeat(np.arange(k), 11))
    assert entropy(column[:, None], 0) == pytest.approx(math.log(k), abs=1e-12)


def test_joint_entropy_of_independent_balanced_columns_adds():
    grid = np.stack([g.ravel() for g in np.meshgrid(range(2), range(3), range(4))], axis=1)
    codes = np.random.default_rng(0).permutation(np.tile(grid, (3, 1)))  # full factorial x 3
    singles = [entropy(codes, j) for j in range(3)]
    assert singles == pytest.approx([math.log(2), math.log(3), math.log(4)], abs=1e-12)
    assert entropy(codes, (0, 2)) == pytest.approx(singles[0] + singles[2], abs=1e-12)
    assert entropy(codes, [0, 1, 2]) == pytest.approx(math.log(24), abs=1e-12)


def test_entropy_equals_scipy_entropy_of_the_counts_and_empty_set_is_zero():
    codes = _random_codes()
    for cols in [(0,), (1,), (0, 2), (0, 1, 2, 3)]:
        counts = np.unique(codes[:, cols], axis=0, return_counts=True)[1]
        assert entropy(codes, cols) == pytest.approx(scipy.stats.entropy(counts), abs=1e-12)
    assert entropy(codes, ()) == 0.0


# --------------------------------------------------------------------------- mutual information


def _brute_force_cmi(codes, x, y, zs):
    """sum_{x,y,z} p(x,y,z) log[p(x,y,z) p(z) / (p(x,z) p(y,z))] from the full joint table."""
    z = np.zeros(len(codes), dtype=int)
    for c in zs:  # the oracle's own mixed-radix index of the joint Z
        z = z * (codes[:, c].max() + 1) + codes[:, c]
    shape = (codes[:, x].max() + 1, codes[:, y].max() + 1, z.max() + 1)
    p = np.zeros(shape)
    np.add.at(p, (codes[:, x], codes[:, y], z), 1.0 / len(codes))
    total = 0.0
    for i, j, k in itertools.product(*map(range, shape)):
        if p[i, j, k] > 0:
            p_z, p_xz, p_yz = p[:, :, k].sum(), p[i, :, k].sum(), p[:, j, k].sum()
            total += p[i, j, k] * math.log(p[i, j, k] * p_z / (p_xz * p_yz))
    return total


@pytest.mark.parametrize("zs", [(), (2,), (3,), (2, 3)])
def test_cmi_equals_brute_force_sum_over_the_joint_table(zs):
    codes = _random_codes(seed=1)
    expected = _brute_force_cmi(codes, 0, 1, zs)
    assert conditional_mutual_information(codes, 0, 1, zs) == pytest.approx(expected, abs=1e-12)
    assert expected > 1e-3  # the data are dependent: a wrong formula cannot pass by being 0


def test_cmi_identities():
    codes = _random_codes(seed=2)
    assert conditional_mutual_information(codes, 0, 0) == pytest.approx(entropy(codes, 0))
    for z in [(), 2, (2, 3)]:
        assert conditional_mutual_information(codes, 0, 1, z) == pytest.approx(
            conditional_mutual_information(codes, 1, 0, z), abs=1e-14
        )
    assert conditional_mutual_information(codes, 0, 4) == pytest.approx(
        mutual_info_score(codes[:, 0], codes[:, 4]), abs=1e-12
    )
    # chain rule I(X; (Y, W)) = I(X; Y) + I(X; W | Y)
    assert conditional_mutual_information(codes, 2, (0, 4)) == pytest.approx(
        conditional_mutual_information(codes, 2, 0)
        + conditional_mutual_information(codes, 2, 4, 0),
        abs=1e-12,
    )


# --------------------------------------------------------------------------- NML normaliser


def _c2_exact(n):
    """C(n, 2) as an exact rational: sum_k binom(n, k) k^k (n - k)^(n - k) / n^n (0^0 = 1)."""
    return sum(Fraction(math.comb(n, k) * k**k * (n - k) ** (n - k), n**n) for k in range(n + 1))


def _compositions(n, r):
    if r == 1:
        yield (n,)
        return
    for h in range(n + 1):
        for rest in _compositions(n - h, r - 1):
            yield (h, *rest)


def _c_brute(n, r):
    """C(n, r) = sum over compositions h of n into r parts of multinomial(n; h) prod (h/n)^h."""
    total = Fraction(0)
    for h in _compositions(n, r):
        multinomial = math.factorial(n) // math.prod(math.factorial(k) for k in h)
        total += Fraction(multinomial * math.prod(k**k for k in h), n**n)
    return total


def test_log_c2_equals_the_exact_rational_sum():
    for n in range(1, 51):
        assert log_nml_normaliser(n, 2) == pytest.approx(math.log(_c2_exact(n)), abs=1e-12)


def test_recursion_equals_brute_force_sums_over_count_vectors():
    for n in range(1, 9):
        for r in range(1, 5):
            expected = math.log(_c_brute(n, r))
            assert log_nml_normaliser(n, r) == pytest.approx(expected, abs=1e-12), (n, r)


def test_normaliser_edge_values_and_monotonicity():
    assert all(log_nml_normaliser(n, 1) == 0.0 for n in (1, 7, 10**5))
    assert log_nml_normaliser(0, 5) == 0.0
    assert log_nml_normaliser(1, 6) == pytest.approx(math.log(6))  # one sample: C(1, r) = r
    for n in (1, 2, 10, 1000):
        assert np.all(np.diff([log_nml_normaliser(n, r) for r in range(1, 30)]) > 0)
    assert np.all(np.diff([log_nml_normaliser(n, 4) for n in range(1, 200)]) > 0)
    with pytest.raises(ValueError, match="r >= 1"):
        log_nml_normaliser(10, 0)
    with pytest.raises(ValueError, match="n >= 0"):
        log_nml_normaliser(-1, 2)


def test_large_n_matches_the_asymptotic_expansion():
    """Szpankowski: log C(n, r) = (r-1)/2 log(n/2) + log(sqrt(pi) / Gamma(r/2))
    + sqrt(2) r Gamma(r/2) / (3 Gamma(r/2 - 1/2)) / sqrt(n) + O(1/n)."""
    n = 10**5
    for r in (2, 3, 10, 50):
        g = math.lgamma(r / 2)
        expansion = (r - 1) / 2 * math.log(n / 2) + 0.5 * math.log(math.pi) - g
        expansion += math.sqrt(2) * r * math.exp(g - math.lgamma(r / 2 - 0.5)) / 3 / math.sqrt(n)
        assert log_nml_normaliser(n, r) == pytest.approx(expansion, abs=1e-4)
    # MIIC uses this expansion for C(n, 2) above n = 1000 (computation_cache.cpp); ours sums
    # exactly, and the difference is below 1e-6 there.
    for n in (1001, 10**5):
        miic = 0.5 * math.log(n * math.pi / 2) + math.sqrt(8 / (9 * n * math.pi))
        miic += (3 * math.pi - 16) / (36 * n * math.pi)
        assert log_nml_normaliser(n, 2) == pytest.approx(miic, abs=1e-6)


# --------------------------------------------------------------------------- MIIC's complexity


def test_bic_closed_form_on_a_hand_example():
    rng = np.random.default_rng(3)
    n = 24
    x, y, z1 = np.arange(n) % 2, np.arange(n) % 3, rng.permutation(np.arange(n) % 2)
    codes = np.stack([x, y, z1, z1], axis=1)  # z2 = z1: 2 joint levels observed, 4 in product
    log_n = math.log(n)
    assert complexity(codes, 0, 1, method="bic") == pytest.approx(0.5 * 1 * 2 * log_n)
    assert complexity(codes, 0, 1, 2, method="bic") == pytest.approx(0.5 * 1 * 2 * 2 * log_n)
    # MIIC's q_z is the product of the conditioning levels (fillHashList), observed or not
    assert complexity(codes, 0, 1, (2, 3), method="bic") == pytest.approx(0.5 * 1 * 2 * 4 * log_n)
    info = n * conditional_mutual_information(codes, 0, 1)
    assert shifted_information(codes, 0, 1, method="bic") == pytest.approx(info - 0.5 * 2 * log_n)


def test_units_agree_with_miic_count_form_on_a_hand_table():
    """MIIC (mutual_information.h, computeMI): info = n log n + sum n_xy log n_xy
    - sum n_x log n_x - sum n_y log n_y, i.e. n * I in nats; k = 1/2 [sum_x log C(n_x, r_y)
    + sum_y log C(n_y, r_x) - log C(n, r_x) - log C(n, r_y)]; infok = info - k."""
    table = np.array([[30, 10], [5, 15]])
    rows = [(i, j) for i in range(2) for j in range(2) for _ in range(table[i, j])]
    codes = np.array(rows)
    n, n_x, n_y = table.sum(), table.sum(1), table.sum(0)

    def nlogn(a):
        return sum(v * math.log(v) for v in np.ravel(a))

    def log_c2(m):
        return math.log(_c2_exact(int(m)))

    info = nlogn([n]) + nlogn(table) - nlogn(n_x) - nlogn(n_y)
    k = 0.5 * (sum(map(log_c2, n_x)) + sum(map(log_c2, n_y)) - 2 * log_c2(n))
    assert info == pytest.approx(n * conditional_mutual_information(codes, 0, 1))
    assert complexity(codes, 0, 1) == pytest.approx(k, abs=1e-12)
    assert shifted_information(codes, 0, 1) == pytest.approx(info - k, abs=1e-12)
    assert info - k > 5  # nats for the whole sample: per-sample units would be < log 2


def _c_closed(m, r):
    """C(m, 2) by the float sum, C(m, 3) = C(m, 2) + m (the recursion's first step)."""
    c2 = sum(math.comb(m, h) * (h / m) ** h * ((m - h) / m) ** (m - h) for h in range(m + 1))
    return {2: c2, 3: c2 + m}[r]


def test_conditional_nml_complexity_equals_per_stratum_sums():
    codes = _random_codes(n=300, seed=4)
    x, y, z = 1, 2, 3  # r_x = 2, r_y = 3, z binary
    r_x, r_y = 2, 3
    k = 0.0
    for value in (0, 1):
        stratum = codes[codes[:, z] == value]
        n_z = len(stratum)
        n_xz = np.bincount(stratum[:, x], minlength=r_x)
        n_yz = np.bincount(stratum[:, y], minlength=r_y)
        k += sum(math.log(_c_closed(int(m), r_y)) for m in n_xz if m) - math.log(
            _c_closed(n_z, r_y)
        )
        k += sum(math.log(_c_closed(int(m), r_x)) for m in n_yz if m) - math.log(
            _c_closed(n_z, r_x)
        )
    assert complexity(codes, x, y, z) == pytest.approx(0.5 * k, abs=1e-9)
    assert complexity(codes, y, x, z) == pytest.approx(0.5 * k, abs=1e-9)
    assert complexity(codes, 0, 1, (3, 2)) == pytest.approx(complexity(codes, 0, 1, (2, 3)))


def test_nml_shifted_information_sign_on_independent_and_dependent_data():
    n = 500
    for seed in range(3):
        rng = np.random.default_rng(seed)
        independent = rng.integers(0, 3, (n, 3))
        assert shifted_information(independent, 0, 1) < 0
        # conditional infok: MIIC clips at 0 (negative_info = FALSE) ...
        assert shifted_information(independent, 0, 1, 2) == 0.0
        raw = shifted_information(independent, 0, 1, 2, negative_info=True)
        assert raw < 0
        expected = n * conditional_mutual_information(independent, 0, 1, 2)
        assert raw == pytest.approx(expected - complexity(independent, 0, 1, 2))
        x = rng.integers(0, 3, n)
        noisy = np.where(rng.random(n) < 0.1, rng.integers(0, 3, n), x)
        dependent = np.stack([x, noisy, rng.integers(0, 3, n)], axis=1)
        assert shifted_information(dependent, 0, 1) > 100
        assert shifted_information(dependent, 0, 1, 2) > 100


def test_single_level_variable_and_bad_method():
    codes = np.stack([np.zeros(10, int), np.arange(10) % 2], axis=1)
    assert shifted_information(codes, 0, 1) == 0.0
    assert complexity(codes, 0, 1) == 0.0
    with pytest.raises(ValueError, match="method"):
        complexity(codes, 0, 1, method="aic")
    with pytest.raises(ValueError, match="out of range"):
        entropy(codes, 2)


# --------------------------------------------------------------------------- cache


def test_information_cache_memoises_with_symmetric_keys():
    codes = _random_codes(n=200, seed=5)
    cache = InformationCache(codes)
    value = cache(0, 1, (2, 3))
    assert value == shifted_information(codes, 0, 1, (2, 3))
    assert (cache.hits, cache.misses) == (0, 1)
    assert cache(1, 0, (3, 2)) == value
    assert (cache.hits, cache.misses) == (1, 1)
    cache(0, 1, 2)
    cache(0, 1)
    cache(1, 0)
    assert (cache.hits, cache.misses, len(cache)) == (2, 3, 3)
    assert cache.key(4, (1, 0)) == cache.key((0, 1), 4) == (((0, 1), (4,)), ())
    assert cache.key(4, (1, 0)) not in cache
    bic = InformationCache(codes, method="bic")
    assert bic(0, 1) == shifted_information(codes, 0, 1, method="bic")
    cache.clear()
    assert (cache.hits, cache.misses, len(cache)) == (0, 0, 0)


# --------------------------------------------------------------------------- encode


def test_encode_codes_values_per_column():
    table = np.array([["a", 3], ["b", 1], ["a", 3], ["c", 2]], dtype=object)
    codes, levels = encode(table)
    assert codes.dtype == np.int64 and levels.tolist() == [3, 3]
    for j in range(2):
        same = table[:, j][:, None] == table[:, j][None, :]
        assert np.array_equal(codes[:, j][:, None] == codes[:, j][None, :], same)
        assert sorted(set(codes[:, j])) == list(range(levels[j]))
    mixed = np.array([["a"], [1], ["a"], [2]], dtype=object)  # unorderable: first appearance
    assert encode(mixed)[0][:, 0].tolist() == [0, 1, 0, 2]


def test_encode_errors():
    with pytest.raises(ValueError, match="missing"):
        encode(np.array([[0.0, 1.0], [1.0, np.nan], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="missing"):
        encode(np.array([["a", 1], [None, 2]], dtype=object))
    with pytest.raises(ValueError, match="at least 2"):
        encode([[0, 1]])
    with pytest.raises(ValueError, match="2-D"):
        encode(np.arange(5))
    with pytest.raises(ValueError, match="column '1' is constant"):
        encode([[0, 7], [1, 7], [0, 7]])
    many = np.stack([np.arange(60), np.arange(60) % 2], axis=1)
    with pytest.raises(ValueError, match="60 distinct values, more than max_levels=50"):
        encode(many)
    assert encode(many, max_levels=60)[1].tolist() == [60, 2]


def test_encode_dataframe_names_columns_in_errors():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"smoker": ["y", "n", "y"], "site": ["a", "a", "a"]})
    with pytest.raises(ValueError, match="column 'site' is constant"):
        encode(frame)
    with pytest.raises(ValueError, match="column 'smoker' has 1 missing"):
        encode(pd.DataFrame({"smoker": ["y", pd.NA, "n"], "site": ["a", "b", "a"]}))
