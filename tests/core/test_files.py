import os

import pytest
import torch

from lightning_info.core import files
from lightning_info.core.files import (
    atomic_savefig,
    atomic_torch_save,
    atomic_write,
    atomic_write_text,
    read_csv_table,
    read_json,
    read_json_lines,
    read_json_or_lines,
)


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_text_lands_and_replaces(tmp_path):
    target = tmp_path / "report.md"
    assert atomic_write_text(target, "first ü\n") == target
    assert target.read_text(encoding="utf-8") == "first ü\n"
    atomic_write_text(target, "second\n")
    assert target.read_text() == "second\n"
    assert _leftovers(tmp_path) == []


def test_failing_writer_keeps_previous_file(tmp_path):
    target = tmp_path / "results.json"
    target.write_bytes(b'{"good": 1}\n')

    def half_then_crash(handle):
        handle.write(b'{"half')
        raise RuntimeError("serializer failed")

    with pytest.raises(RuntimeError, match="serializer failed"):
        atomic_write(target, half_then_crash)
    assert target.read_bytes() == b'{"good": 1}\n'
    assert _leftovers(tmp_path) == []


def test_failing_replace_keeps_previous_file(tmp_path, monkeypatch):
    target = tmp_path / "selection.json"
    target.write_bytes(b"old")

    def crash(*args):
        raise OSError("disk gone")

    monkeypatch.setattr(files.os, "replace", crash)
    with pytest.raises(OSError, match="disk gone"):
        atomic_write_text(target, "new")
    assert target.read_bytes() == b"old"
    assert _leftovers(tmp_path) == []


def test_interrupt_is_cleaned_up(tmp_path):
    target = tmp_path / "a.txt"

    def interrupted(handle):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, interrupted)
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_unencodable_text_touches_nothing(tmp_path):
    target = tmp_path / "a.txt"
    target.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        atomic_write_text(target, "ü", encoding="ascii")
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"folder .*missing.* does not exist; create it"):
        atomic_write_text(tmp_path / "missing" / "a.txt", "x")


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_permissions_follow_umask_and_existing_mode(tmp_path):
    fresh = tmp_path / "fresh.txt"
    atomic_write_text(fresh, "x")
    umask = os.umask(0)
    os.umask(umask)
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~umask
    kept = tmp_path / "kept.txt"
    kept.write_text("x")
    kept.chmod(0o640)
    atomic_write_text(kept, "y")
    assert kept.stat().st_mode & 0o777 == 0o640


def test_torch_save_round_trips_and_failure_keeps_file(tmp_path):
    target = tmp_path / "scorer.pt"
    atomic_torch_save({"w": torch.arange(3)}, target)
    assert torch.equal(torch.load(target, weights_only=True)["w"], torch.arange(3))
    before = target.read_bytes()
    with pytest.raises(Exception):  # noqa: B017 - torch's pickling error type varies
        atomic_torch_save({"f": lambda: None}, target)
    assert target.read_bytes() == before
    assert _leftovers(tmp_path) == []


def test_savefig_writes_png(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = plt.figure()
    try:
        atomic_savefig(figure, tmp_path / "plot.png", dpi=20)
    finally:
        plt.close(figure)
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert _leftovers(tmp_path) == []


def test_read_json_names_file_line_and_column(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{\n  "a": 1,\n  "b": tru\n}\n')
    with pytest.raises(ValueError, match=r"config\.json, line 3, column 8: not valid JSON"):
        read_json(path)
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}')
    assert read_json(path) == {"a": 1}
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(ValueError, match=r"config\.json is not UTF-8 text"):
        read_json(path)


def test_read_json_lines_gives_line_numbers_and_names_bad_lines(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n[2]\n{"a": \n')
    rows = read_json_lines(path)
    assert next(rows) == (1, {"a": 1}) and next(rows) == (3, [2])
    with pytest.raises(ValueError, match=r"rows\.jsonl, line 4, column \d+: not valid JSON"):
        next(rows)


def test_read_json_or_lines_tells_the_formats_apart(tmp_path):
    path = tmp_path / "data"
    path.write_text('[\n  {"a": 1},\n  {"a": 2}\n]\n')
    assert read_json_or_lines(path) == [{"a": 1}, {"a": 2}]
    path.write_text('{"a": 1}\n{"a": 2}\n')
    assert read_json_or_lines(path) == [{"a": 1}, {"a": 2}]
    path.write_text("\n\n")
    assert read_json_or_lines(path) == []
    path.write_text('{"a": 1}\n{"a": 2\n')
    with pytest.raises(ValueError, match=r"data, line 2, column \d+: .*JSON-lines"):
        read_json_or_lines(path)
    path.write_text('[\n  {"a": 1},\n  {"a" 2}\n]\n')
    with pytest.raises(ValueError, match=r"data, line 3, column \d+: not valid JSON .* nor JSON"):
        read_json_or_lines(path)


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("a,b,a\n1,2,3\n", ValueError, r"repeats the column name\(s\) \['a'\]"),
        ("a,b\n1,2\n3\n", ValueError, r"line 3: 1 field\(s\) for the header's 2 columns"),
        ("", ValueError, "has no header row"),
    ],
)
def test_read_csv_table_refuses_what_pandas_would_bend(tmp_path, text, error, message):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(error, match=message):
        read_csv_table(path)


def test_read_csv_table_reads_a_bom_and_empty_fields_like_pandas(tmp_path):
    pandas = pytest.importorskip("pandas")
    plain, marked = tmp_path / "plain.csv", tmp_path / "marked.csv"
    plain.write_text("a,b\n1,\n3,4\n")
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    pandas.testing.assert_frame_equal(read_csv_table(marked), pandas.read_csv(plain))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_csv_table(tmp_path / "none.csv")
