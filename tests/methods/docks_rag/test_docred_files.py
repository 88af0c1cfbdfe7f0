import pytest

from lightning_info.methods.docks_rag.docred import read_docred, read_relation_info


def test_a_docred_syntax_error_names_the_file_and_line(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text('[\n  {"title": "A",\n   "sents": [["x"]]\n  "vertexSet": []}\n]\n')
    with pytest.raises(ValueError, match=r"dev\.json, line 4, column \d+: not valid JSON"):
        read_docred(path)


def test_a_rel_info_syntax_error_names_the_file_and_line(tmp_path):
    path = tmp_path / "rel_info.json"
    path.write_text('{"P17": "country",\n "P131": }\n')
    with pytest.raises(ValueError, match=r"rel_info\.json, line 2, column \d+: not valid JSON"):
        read_relation_info(path)


def test_a_non_utf8_file_is_named(tmp_path):
    path = tmp_path / "dev.json"
    path.write_bytes(b'["\xff"]')
    with pytest.raises(ValueError, match=r"dev\.json is not UTF-8 text"):
        read_docred(path)


def test_documents_must_be_objects(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text('["a title"]')
    with pytest.raises(ValueError, match=r"dev\.json: every document must be a JSON object"):
        read_docred(path)
