import json

import numpy as np
import pytest
import torch

from lightning_info.methods.graph4mm.graphs import read_graphs_json


def _write_graph(folder, image):
    path = folder / "graphs.json"
    path.write_text(json.dumps([{"nodes": [{"text": "a", "image": image, "label": "x"}]}]))
    return path


def test_a_relative_npy_path_inside_the_folder_loads(tmp_path):
    (tmp_path / "images").mkdir()
    np.save(tmp_path / "images" / "a.npy", np.ones((2, 2), dtype=np.float32))
    graphs, _ = read_graphs_json(_write_graph(tmp_path, "images/./a.npy"))
    assert torch.equal(graphs[0].images[0], torch.ones(1, 2, 2))


def test_a_pickled_object_array_is_refused(tmp_path):
    np.save(tmp_path / "evil.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match=r"graph 0, node 0: image file .*evil\.npy.* numeric"):
        read_graphs_json(_write_graph(tmp_path, "evil.npy"))


@pytest.mark.parametrize("image", ["../outside.npy", "images/../../outside.npy", "ABSOLUTE"])
def test_an_image_path_leaving_the_folder_is_refused(tmp_path, image):
    data = tmp_path / "data"
    data.mkdir()
    np.save(tmp_path / "outside.npy", np.ones((2, 2), dtype=np.float32))
    if image == "ABSOLUTE":
        image = str(tmp_path / "outside.npy")
    with pytest.raises(ValueError, match=r"graph 0, node 0: image path .* leaves the folder"):
        read_graphs_json(_write_graph(data, image))


def test_a_missing_npy_file_names_the_entry(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"graph 0, node 0: image file 'no\.npy' not found"):
        read_graphs_json(_write_graph(tmp_path, "no.npy"))


def test_a_npz_archive_is_refused(tmp_path):
    np.savez(tmp_path / "two.npz", a=np.ones(2), b=np.zeros(2))
    with pytest.raises(ValueError, match=r"must be a \.npy file holding one array"):
        read_graphs_json(_write_graph(tmp_path, "two.npz"))


def test_json_syntax_errors_name_the_file_and_line(tmp_path):
    path = tmp_path / "graphs.json"
    path.write_text('[\n  {"nodes": [{"text": "a"}]},\n  {"nodes": [}\n]\n')
    with pytest.raises(ValueError, match=r"graphs\.json, line 3, column \d+: not valid JSON"):
        read_graphs_json(path)
    lines = tmp_path / "graphs.jsonl"
    lines.write_text('{"nodes": [{"text": "a"}]}\n\n{"nodes": [{"text": "b"}\n')
    with pytest.raises(ValueError, match=r"graphs\.jsonl, line 3, column \d+: not valid JSON"):
        read_graphs_json(lines)


def test_graphs_must_be_json_objects(tmp_path):
    path = tmp_path / "graphs.json"
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="must hold graphs: JSON objects"):
        read_graphs_json(path)
