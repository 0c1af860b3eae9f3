"""The per-token int8 rewrite (garden/retrievers/_int8.py) against a reference written here in
numpy: each token's row takes its own scale, so one row never moves another."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from garden.retrievers._int8 import quantize_per_token

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

K = 16
RNG = np.random.default_rng(3)
W_SHARED_A = RNG.standard_normal((K, 6)).astype(np.float32)
W_SHARED_B = RNG.standard_normal((K, 4)).astype(np.float32)
W_ALONE = RNG.standard_normal((4, 5)).astype(np.float32)


def small_model(path: Path) -> None:
    """y1 = x @ A, y2 = x @ B (one input read twice, as a layer's query and key read theirs),
    z = y2 @ C: three weight products, one of them on an activation the model computed."""
    nodes = [helper.make_node("MatMul", ["x", "A"], ["y1"]), helper.make_node("MatMul", ["x", "B"], ["y2"]),
             helper.make_node("MatMul", ["y2", "C"], ["z"])]
    weights = [numpy_helper.from_array(w, n) for n, w in (("A", W_SHARED_A), ("B", W_SHARED_B), ("C", W_ALONE))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, None, K])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y1", "y2", "z")],
                              weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def reference_product(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Per-token symmetric 8-bit activations times per-column 7-bit weights, in float64."""
    w_scale = np.abs(w).max(axis=0) / 63
    w_codes = np.clip(np.round(w / w_scale), -63, 63)
    top = np.maximum(np.abs(x).max(axis=-1, keepdims=True), 1e-12)
    x_codes = np.floor(x.astype(np.float64) * (127 / top) + 128.5) - 128   # round half up
    return (x_codes @ w_codes) * (top / 127) * w_scale


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    folder = tmp_path_factory.mktemp("int8")
    small_model(folder / "fp32.onnx")
    quantize_per_token(folder / "fp32.onnx", folder / "int8.onnx")
    model = onnx.load(str(folder / "int8.onnx"))
    ops = [n.op_type for n in model.graph.node]
    assert "MatMul" not in ops and ops.count("MatMulIntegerToFloat") == 2   # A and B run as one product
    codes = [numpy_helper.to_array(t) for t in model.graph.initializer if t.data_type == TensorProto.INT8]
    assert codes and all(np.abs(c).max() <= 63 for c in codes)             # 7-bit weights: no saturation
    return ort.InferenceSession(str(folder / "int8.onnx"), providers=["CPUExecutionProvider"])


def test_products_match_the_reference(session):
    x = RNG.standard_normal((3, 5, K)).astype(np.float32) * np.array([0.01, 1, 30], dtype=np.float32)[:, None, None]
    y1, y2, z = session.run(["y1", "y2", "z"], {"x": x})
    for got, want in ((y1, reference_product(x, W_SHARED_A)), (y2, reference_product(x, W_SHARED_B)),
                      (z, reference_product(y2, W_ALONE))):
        # float32 against float64: a code can differ by one where x * 127 / max lands on .5
        assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    exact = x @ W_SHARED_A
    assert np.abs(y1 - exact).max() <= 0.03 * np.abs(exact).max()   # and int8 stays near float32


def test_a_row_never_moves_another(session):
    x = RNG.standard_normal((2, 4, K)).astype(np.float32)
    alone = session.run(["y1", "z"], {"x": x})
    loud = x.copy()
    loud[1, 3] *= 1000                                  # one token far louder than the rest
    crowded = session.run(["y1", "z"], {"x": loud})
    for a, c in zip(alone, crowded):
        mask = np.ones(a.shape[:2], dtype=bool)
        mask[1, 3] = False
        assert np.abs(a[mask] - c[mask]).max() <= 1e-6
    # one scale for the whole run, as dynamic quantization takes it, would have moved them
    top = np.abs(loud).max()
    shared = np.round(x[0] * (127 / top)) * (top / 127)
    assert np.abs(shared @ W_SHARED_A - alone[0][0]).max() > 1e-2
