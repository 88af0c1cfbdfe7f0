"""Bad graph files and arguments are refused with a message naming the file, the graph and
the node: image paths leaving the JSON file's folder (``../``, absolute paths, symbolic links),
pickled or truncated ``.npy`` files, truncated JSON, node indices that are floats, bools or
strings, malformed nodes and images, class names given as one string or repeated, and prompt
templates with unknown fields. A BOM, a symbolic link inside the folder and integer indices
still read as before."""

import json

import numpy as np
import pytest
import torch

from lightning_info.methods.graph4mm.datamodule import MultimodalGraphDataModule
from lightning_info.methods.graph4mm.graphs import digit_graphs, read_graphs_json
from tests.methods.graph4mm import tiny


def _read(records, **kwargs):
    """A callable of the test's temporary folder that writes ``records`` there and reads it."""

    def call(folder):
        path = folder / "graphs.json"
        path.write_text(json.dumps(records))
        return read_graphs_json(path, **kwargs)

    return call


def _two_nodes(**fields):
    return _read([{"nodes": [{"text": "a"}, {"text": "b", "label": "x"}], **fields}])


def _image(image):
    return _read([{"nodes": [{"text": "a", "image": image}]}])


def _symlink_outside(folder):
    data = folder / "data"
    data.mkdir()
    np.save(folder / "secret.npy", np.ones((2, 2), dtype=np.float32))
    (data / "link.npy").symlink_to(folder / "secret.npy")
    return read_graphs_json(_write_graph(data, "link.npy"))


def _truncated_npy(folder):
    np.save(folder / "a.npy", np.ones((8, 8), dtype=np.float32))
    (folder / "a.npy").write_bytes((folder / "a.npy").read_bytes()[:-20])
    return read_graphs_json(_write_graph(folder, "a.npy"))


def _truncated_json(folder):
    path = folder / "graphs.json"
    path.write_text('[{"nodes": [{"text": "a"}]')
    return read_graphs_json(path)


def _digits(**kwargs):
    return digit_graphs(torch.zeros(10, 1, 2, 2), torch.arange(10), 1, **kwargs)


def _data(**kwargs):
    return MultimodalGraphDataModule(tiny.tokenizer(), **{**tiny.SIZES, **kwargs})


BAD_INPUT = [
    pytest.param(
        _symlink_outside,
        ValueError,
        r"graph 0, node 0: image path 'link.npy' resolves to .*secret\.npy, outside the folder",
        id="npy-symlink-outside-folder",
    ),
    pytest.param(
        _truncated_npy,
        ValueError,
        r"graph 0, node 0: image file .*a\.npy is not a numeric \.npy array",
        id="npy-truncated",
    ),
    pytest.param(
        _truncated_json,
        ValueError,
        r"graphs\.json, line 1, column \d+: not valid JSON",
        id="json-truncated",
    ),
    pytest.param(
        _two_nodes(centre=True),
        ValueError,
        r"graph 0: centre True is not a node index; pass an int in \[0, 2\)",
        id="centre-bool",
    ),
    pytest.param(
        _two_nodes(centre=1.7),
        ValueError,
        r"graph 0: centre 1.7 is not a node index",
        id="centre-float",
    ),
    pytest.param(
        _two_nodes(centre="x"),
        ValueError,
        r"graph 0: centre 'x' is not a node index",
        id="centre-str",
    ),
    pytest.param(
        _two_nodes(edges=[[0.5, 1]]),
        ValueError,
        r"graph 0: edges must be \[a, b\] pairs of node indices, ints in \[0, 2\); "
        r"edge 0 is \[0.5, 1\]",
        id="edge-float",
    ),
    pytest.param(
        _two_nodes(edges=[[False, True]]),
        ValueError,
        r"edge 0 is \[False, True\]",
        id="edge-bool",
    ),
    pytest.param(
        _two_nodes(edges=[[0, 1, 1]]),
        ValueError,
        r"graph 0: edges must be a list of \[a, b\] pairs",
        id="edge-triple",
    ),
    pytest.param(
        _two_nodes(edges=[[1, 1]]),
        ValueError,
        r"graph 0: an edge links a node to itself",
        id="edge-self-loop",
    ),
    pytest.param(
        _read([{"nodes": {"a": 1}}]),
        ValueError,
        r"graph 0: 'nodes' must be a list of JSON objects",
        id="nodes-object",
    ),
    pytest.param(
        _read([{"nodes": ["a", "b"]}]),
        ValueError,
        r"graph 0: 'nodes' must be a list of JSON objects",
        id="nodes-strings",
    ),
    pytest.param(
        _image([["a", "b"]]),
        ValueError,
        r"graph 0, node 0: an image must be a nested list of numbers",
        id="image-strings",
    ),
    pytest.param(
        _image([[1, 2], [3]]),
        ValueError,
        r"graph 0, node 0: an image must be a nested list of numbers of one shape",
        id="image-ragged",
    ),
    pytest.param(
        _image([[True, False]]),
        ValueError,
        r"graph 0, node 0: an image must be a nested list of numbers",
        id="image-bools",
    ),
    pytest.param(
        _read([{"nodes": [{"text": "a", "label": "a"}]}], class_names="ab"),
        TypeError,
        r"`class_names` must be a sequence of strings, got a single str",
        id="class-names-str",
    ),
    pytest.param(
        _read([{"nodes": [{"text": "a", "label": "a"}]}], class_names=["a", "b", "a"]),
        ValueError,
        r"`class_names` repeats \['a'\]; give each class once",
        id="class-names-repeated",
    ),
    pytest.param(
        lambda: _digits(seed=-1),
        ValueError,
        r"`seed` must be >= 0",
        id="digit-graphs-seed-negative",
    ),
    pytest.param(
        lambda: _digits(seed=1.5), TypeError, r"`seed` must be an int", id="digit-graphs-seed-float"
    ),
    pytest.param(
        lambda: _data(prompt=None),
        TypeError,
        r"`prompt` must be a template string, got NoneType",
        id="datamodule-prompt-none",
    ),
    pytest.param(
        lambda: _data(prompt="{context} {x}"),
        ValueError,
        r"`prompt` '\{context\} \{x\}' is not a template of \{context\} and \{graph\} alone "
        r"\(KeyError",
        id="datamodule-prompt-unknown-field",
    ),
    pytest.param(
        lambda: _data(class_names=["a", "b"]),
        ValueError,
        r"`class_names` names the classes of a file source",
        id="datamodule-class-names-with-digits",
    ),
    pytest.param(
        lambda: tiny.module(freeze_image_encoder="no"),
        TypeError,
        r"`freeze_image_encoder` must be True or False, got 'no'",
        id="module-freeze-image-encoder-str",
    ),
]


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


def test_a_bom_a_symlink_inside_the_folder_and_integer_indices_still_read(tmp_path):
    records = [
        {"nodes": [{"text": "a", "image": "images/link.npy"}, {"text": "b"}], "edges": [[1, 0]]}
    ]
    (tmp_path / "images").mkdir()
    np.save(tmp_path / "images" / "a.npy", np.full((2, 2), 0.25, dtype=np.float32))
    (tmp_path / "images" / "link.npy").symlink_to(tmp_path / "images" / "a.npy")
    plain, bom = tmp_path / "plain.json", tmp_path / "bom.json"
    plain.write_text(json.dumps(records), encoding="utf-8")
    bom.write_text(json.dumps(records), encoding="utf-8-sig")
    assert bom.read_bytes().startswith(b"\xef\xbb\xbf")
    (graph,), _ = read_graphs_json(plain)
    (again,), _ = read_graphs_json(bom)
    assert graph.texts == again.texts == ("a", "b")
    assert torch.equal(graph.images, again.images)
    assert torch.equal(graph.images[0], torch.full((1, 2, 2), 0.25))
    assert graph.edges.tolist() == again.edges.tolist() == [[1, 0]]


from torch import nn  # noqa: E402

from lightning_info.methods.graph4mm import (  # noqa: E402
    DigitGraphOptions,
    Graph4MM,
    MMQFormer,
    MultimodalGraph,
    PretrainedImageEncoder,
    SmallConvEncoder,
    image_encoder,
    masked_softmax_transition,
    variant_qformer,
)


def _graph(**fields):
    """A two-node graph ``0 - 1`` with ``fields`` replaced."""
    base = dict(
        texts=("a", "b"),
        images=torch.zeros(2, 1, 2, 2),
        has_image=torch.zeros(2, dtype=torch.bool),
        edges=torch.tensor([[0, 1]]),
        label=0,
        target="x",
    )
    return MultimodalGraph(**{**base, **fields})


BAD_INPUT += [
    pytest.param(
        lambda: DigitGraphOptions(max_neighbours=True),
        TypeError,
        r"`digits.max_neighbours` must be an int, got True",
        id="digit-options-bool-neighbours",
    ),
    pytest.param(
        lambda: DigitGraphOptions(homophily=float("nan")),
        ValueError,
        r"`digits.homophily` must be finite",
        id="digit-options-nan-homophily",
    ),
    pytest.param(
        lambda: _graph(texts="ab"),
        TypeError,
        r"`texts` must be a sequence of strings, got a single str",
        id="graph-texts-str",
    ),
    pytest.param(
        lambda: _graph(edges=torch.tensor([[0.0, 1.5]])),
        TypeError,
        r"`edges` must hold integer node indices, got dtype torch.float32",
        id="graph-edges-float",
    ),
    pytest.param(
        lambda: _graph(edges=torch.tensor([[False, True]])),
        TypeError,
        r"`edges` must hold integer node indices, got dtype torch.bool",
        id="graph-edges-bool",
    ),
    pytest.param(
        lambda: _graph(label=True), TypeError, r"`label` must be an int", id="graph-label-bool"
    ),
    pytest.param(
        lambda: _graph(label=1.5), TypeError, r"`label` must be an int", id="graph-label-float"
    ),
    pytest.param(
        lambda: _graph(label=-3), ValueError, r"`label` must be >= -1", id="graph-label-negative"
    ),
    pytest.param(
        lambda: _graph(images=torch.full((2, 1, 2, 2), float("nan"))),
        ValueError,
        r"`images` contains 8 NaN/inf",
        id="graph-images-nan",
    ),
    pytest.param(
        lambda: _graph(images=torch.zeros(2, 1, 2, 2, dtype=torch.uint8)),
        TypeError,
        r"`images` must be a real floating-point tensor",
        id="graph-images-uint8",
    ),
    pytest.param(
        lambda: _graph(has_image=torch.tensor([0.3, 2.0])),
        TypeError,
        r"`has_image` must be a bool tensor",
        id="graph-has-image-float",
    ),
    pytest.param(
        lambda: _graph().neighbours(-1),
        ValueError,
        r"`node` must be an index in \[0, 2\), got -1",
        id="graph-neighbours-negative",
    ),
    pytest.param(
        lambda: _graph().neighbours(True),
        TypeError,
        r"`node` must be an integer index, got bool",
        id="graph-neighbours-bool",
    ),
    pytest.param(
        lambda: masked_softmax_transition(torch.zeros(3, 3), torch.ones(2, 2, dtype=torch.bool)),
        ValueError,
        r"`adjacency` must be a \(\.\.\., 3, 3\) mask like `logits`",
        id="masked-softmax-shape-mismatch",
    ),
    pytest.param(
        lambda: masked_softmax_transition(torch.zeros(2, 2, dtype=torch.long), torch.ones(2, 2)),
        ValueError,
        r"`logits` must be a floating \(\.\.\., N, N\) tensor, got dtype torch.int64",
        id="masked-softmax-int-logits",
    ),
    pytest.param(
        lambda: masked_softmax_transition(torch.zeros(2, 3), torch.ones(2, 3)),
        ValueError,
        r"`logits` must be a floating \(\.\.\., N, N\) tensor.*shape \(2, 3\)",
        id="masked-softmax-not-square",
    ),
    pytest.param(
        lambda: SmallConvEncoder(dim=8.0), TypeError, r"`dim` must be an int", id="conv-dim-float"
    ),
    pytest.param(
        lambda: SmallConvEncoder(dim=8)(torch.zeros(1, 1, 8, 8, dtype=torch.long)),
        TypeError,
        r"`images` must be a real floating-point tensor, got dtype torch.int64",
        id="conv-forward-int-images",
    ),
    pytest.param(
        lambda: PretrainedImageEncoder(nn.Linear(2, 2), out_dim=2.7),
        TypeError,
        r"`out_dim` must be an int, got 2.7",
        id="pretrained-out-dim-float",
    ),
    pytest.param(
        lambda: PretrainedImageEncoder(nn.Linear(2, 2), out_dim=True),
        TypeError,
        r"`out_dim` must be an int, got True",
        id="pretrained-out-dim-bool",
    ),
    pytest.param(
        lambda: PretrainedImageEncoder(nn.Linear(2, 2), out_dim=2, frozen="no"),
        TypeError,
        r"`frozen` must be True or False, got 'no'",
        id="pretrained-frozen-str",
    ),
    pytest.param(
        lambda: PretrainedImageEncoder("resnet", out_dim=2),
        TypeError,
        r"`model` must be an nn.Module, got str",
        id="pretrained-model-str",
    ),
    pytest.param(
        lambda: image_encoder(nn.Linear(2, 2), frozen="no"),
        TypeError,
        r"`frozen` must be True or False, got 'no'",
        id="image-encoder-frozen-str",
    ),
    pytest.param(
        lambda: image_encoder(3),
        TypeError,
        r"image_encoder must be None, a model name or an nn.Module, got 3",
        id="image-encoder-int",
    ),
    pytest.param(
        lambda: variant_qformer("graph4MM"),
        ValueError,
        r"`variant` must be one of",
        id="variant-qformer-unknown",
    ),
    pytest.param(
        lambda: variant_qformer("graph4mm", dim=16, heads=2, ffn_mult=True),
        TypeError,
        r"`ffn_mult` must be an int, got True",
        id="variant-qformer-ffn-bool",
    ),
    pytest.param(
        lambda: variant_qformer("graph4mm", dim=16, heads=2, hop="alpha=0.1"),
        TypeError,
        r"`hop` must be a dict of HopDiffusedAttention settings, got str",
        id="variant-qformer-hop-str",
    ),
    pytest.param(
        lambda: variant_qformer("graph4mm", dim=16, heads=2, hop={"alfa": 0.1}),
        ValueError,
        r"`hop` has unknown settings \['alfa'\]",
        id="variant-qformer-hop-unknown-key",
    ),
    pytest.param(
        lambda: MMQFormer(16, heads=2, ffn_mult=2.5),
        TypeError,
        r"`ffn_mult` must be an int, got 2.5",
        id="qformer-ffn-float",
    ),
    pytest.param(
        lambda: MMQFormer(16, heads=3), ValueError, r"divisible by heads", id="qformer-heads"
    ),
    pytest.param(
        lambda: Graph4MM(tiny.lm(), tiny.tokenizer(), variant="graph4MM"),
        ValueError,
        r"`variant` must be one of",
        id="module-variant-unknown",
    ),
    pytest.param(
        lambda: Graph4MM(tiny.lm(), tiny.tokenizer(), num_classes=True),
        TypeError,
        r"`num_classes` must be an int",
        id="module-num-classes-bool",
    ),
]


def test_masked_softmax_transition_still_takes_a_float_mask():
    logits = torch.tensor([[0.0, 1.0, 2.0], [0.5, 0.0, 0.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    e = torch.e
    expected = torch.tensor([[0.0, 1 / (1 + e), e / (1 + e)], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    torch.testing.assert_close(masked_softmax_transition(logits, mask), expected)
    torch.testing.assert_close(masked_softmax_transition(logits, mask.bool()), expected)


from lightning_info.methods.graph4mm import functional as _core  # noqa: E402

_SCORES = torch.ones(1, 3, 3)

BAD_INPUT += [
    pytest.param(
        lambda: _core.adjacency_mask(_SCORES, [[1, 1, 1]] * 3),
        TypeError,
        r"`scores` and `adjacency` must be tensors, got Tensor and list",
        id="adjacency-mask-list",
    ),
    pytest.param(
        lambda: _core.adjacency_mask(_SCORES, torch.full((3, 3), 2.0)),
        ValueError,
        r"adjacency must be binary \(0/1 or bool\)",
        id="adjacency-mask-not-binary",
    ),
    pytest.param(
        lambda: _core.check_hop_weights(torch.tensor([True, False])),
        TypeError,
        r"`theta` must be a real floating-point tensor, got dtype torch.bool",
        id="hop-weights-bool",
    ),
    pytest.param(
        lambda: _core.check_hop_weights([0.5, 0.5]),
        TypeError,
        r"`theta` must be a tensor of hop weights, got list",
        id="hop-weights-list",
    ),
    pytest.param(
        lambda: _core.check_hop_weights(torch.zeros(0)),
        ValueError,
        r"`theta` must hold at least one hop weight",
        id="hop-weights-empty",
    ),
    pytest.param(
        lambda: _core.renormalised_rows(torch.ones(1, 2, 2), torch.ones(3, 3)),
        ValueError,
        r"adjacency \(3, 3\) does not fit scores \(1, 2, 2\): pass it through adjacency_mask",
        id="renormalised-rows-shape",
    ),
]


def test_renormalised_rows_matches_row_division():
    """Each row of ``scores * adjacency`` divided by its sum; an isolated row becomes the
    identity row (brute force in float64)."""
    scores = torch.tensor([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]])
    adjacency = _core.adjacency_mask(scores, torch.tensor([[1, 1, 0], [0, 0, 0], [1, 0, 1]]))
    rows = _core.renormalised_rows(scores, adjacency)[0].double()
    expected = torch.tensor([[1 / 3, 2 / 3, 0.0], [0.0, 1.0, 0.0], [7 / 16, 0.0, 9 / 16]])
    assert torch.allclose(rows, expected.double(), atol=1e-6)
