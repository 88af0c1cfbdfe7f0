"""DocRED files a user gives: JSON errors name the file, line and column (``BAD_INPUT``, run by
``tests/test_bad_input.py``)."""

import pytest

from lightning_info.methods.docks_rag.docred import read_docred, read_relation_info


def _written(folder, name: str, content: str | bytes):
    path = folder / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


MISSING_COMMA = '[\n  {"title": "A",\n   "sents": [["x"]]\n  "vertexSet": []}\n]\n'
MISSING_VALUE = '{"P17": "country",\n "P131": }\n'

BAD_INPUT = [
    pytest.param(
        lambda tmp: read_docred(_written(tmp, "dev.json", MISSING_COMMA)),
        ValueError,
        r"dev\.json, line 4, column \d+: not valid JSON",
        id="docred-syntax-error",
    ),
    pytest.param(
        lambda tmp: read_relation_info(_written(tmp, "rel_info.json", MISSING_VALUE)),
        ValueError,
        r"rel_info\.json, line 2, column \d+: not valid JSON",
        id="rel-info-syntax",
    ),
    pytest.param(
        lambda tmp: read_docred(_written(tmp, "dev.json", b'["\xff"]')),
        ValueError,
        r"dev\.json is not UTF-8 text",
        id="not-utf8",
    ),
    pytest.param(
        lambda tmp: read_docred(_written(tmp, "dev.json", '["a title"]')),
        ValueError,
        r"dev\.json: every document must be a JSON object",
        id="document-not-object",
    ),
]
