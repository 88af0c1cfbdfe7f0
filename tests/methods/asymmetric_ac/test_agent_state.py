"""Window codes: the update U, the round trip code <-> window, bad arguments."""

import itertools

import numpy as np
import pytest

from lightning_info.methods.asymmetric_ac.agent_state import WindowEncoding


@pytest.mark.parametrize(("n", "k"), [(1, 1), (3, 2), (4, 3)])
def test_encode_decode_round_trip_over_every_window(n, k):
    encoding = WindowEncoding(n, k)
    windows = list(itertools.product(range(n + 1), repeat=k))
    codes = [encoding.encode(window) for window in windows]
    assert sorted(codes) == list(range(encoding.size)) == list(range((n + 1) ** k))
    for window, code in zip(windows, codes):
        np.testing.assert_array_equal(encoding.decode(code), window)


def test_update_shifts_the_window_and_starts_from_blanks():
    encoding = WindowEncoding(4, 3)
    assert encoding.blank == 4
    np.testing.assert_array_equal(encoding.decode(encoding.empty), [4, 4, 4])
    code = encoding.update(encoding.empty, 2)
    np.testing.assert_array_equal(encoding.decode(code), [4, 4, 2])
    for observation in (0, 3, 1):
        code = encoding.update(code, observation)
    np.testing.assert_array_equal(encoding.decode(code), [0, 3, 1])


def test_update_is_elementwise_on_arrays():
    encoding = WindowEncoding(3, 2)
    codes = np.array([encoding.encode([0, 1]), encoding.encode([3, 2])])
    np.testing.assert_array_equal(
        encoding.update(codes, np.array([2, 0])),
        [encoding.encode([1, 2]), encoding.encode([2, 0])],
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="`length` must be >= 1"):
        WindowEncoding(3, 0)
    with pytest.raises(ValueError, match="`num_observations` must be >= 1"):
        WindowEncoding(0, 2)
    with pytest.raises(TypeError, match="must be an int"):
        WindowEncoding(3, 2.0)
    with pytest.raises(ValueError, match="shorter window"):
        WindowEncoding(1000, 10)
    encoding = WindowEncoding(3, 2)
    with pytest.raises(ValueError, match="hold 2 entries"):
        encoding.encode([0, 1, 2])
    with pytest.raises(ValueError, match=r"`window\[1\]` must be an index in \[0, 4\)"):
        encoding.encode([0, 4])
    with pytest.raises(ValueError, match=r"\[0, 16\)"):
        encoding.decode(16)
