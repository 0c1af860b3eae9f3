"""Per-token int8: an exported transformer's weight products rewritten to run in 8-bit integers.

Every MatMul by a constant 2-D weight W becomes

    s = max|x| / 127 over each token's row       (one scale per token: per-token activations)
    q = trunc(x / s + 128.5)                     (x rounded to a symmetric 8-bit code, held as uint8 at offset 128)
    y = s * ((q - 128) @ Wq) * w                 (MatMulIntegerToFloat; w one scale per output column)

after ZeroQuant's token-wise activations and per-channel weights (Yao et al., NeurIPS 2022,
"ZeroQuant: Efficient and Affordable Post-Training Quantization for Large-Scale
Transformers"; the vector-wise products of Dettmers et al., NeurIPS 2022, "LLM.int8()").
Products that read the same input (a layer's query, key and value) share one quantization and
run as one product, then split.

Why per token: a token's scale is taken over its own row only, so a text's vector never
depends on what else shares its batch, nor on padding (ONNX Runtime's dynamic quantization
takes one scale over the whole batch). Why 7-bit weights (-63..63): on x86 without VNNI the
uint8-by-int8 kernel adds pairs of products in 16 bits (vpmaddubsw), which saturates past
32,767; 2 * 255 * 63 stays under it, so the integer products are exact on every CPU. The
attention products (between activations) and everything else stay float32.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

WEIGHT_LEVELS = 63  # 7-bit weights: see the docstring
ACTIVATION_LEVELS = 127
SCHEME = f"per-token int8 activations, per-column {WEIGHT_LEVELS}-level weights"  # part of the file's fingerprint


def quantize_weights(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-column codes (int8 in -63..63) and scales of a (K, N) float weight."""
    scales = np.maximum(np.abs(weight).max(axis=0), 1e-12) / WEIGHT_LEVELS
    codes = np.clip(np.round(weight / scales), -WEIGHT_LEVELS, WEIGHT_LEVELS).astype(np.int8)
    return codes, scales.astype(np.float32)


def quantize_per_token(source: Path, target: Path) -> None:
    """Write `source` (an ONNX model) to `target` with its weight products per-token int8."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    weights = {t.name: t for t in graph.initializer if len(t.dims) == 2}
    products = [n for n in graph.node if n.op_type == "MatMul" and n.input[1] in weights]
    readers: dict[str, list] = {}
    for node in products:
        readers.setdefault(node.input[0], []).append(node)
    constants = {"pt_tiny": np.float32(1e-12), "pt_levels": np.float32(ACTIVATION_LEVELS),
                 "pt_inverse": np.float32(1 / ACTIVATION_LEVELS), "pt_offset": np.float32(128.5),
                 "pt_zero": np.uint8(128), "pt_one": np.float32(1.0)}
    added = [numpy_helper.from_array(np.array(v), k) for k, v in constants.items()]
    nodes, done = [], set()
    for node in graph.node:
        if node.op_type != "MatMul" or node.input[1] not in weights:
            nodes.append(node)
            continue
        x = node.input[0]
        if x in done:
            continue
        done.add(x)
        group, p = readers[x], f"{x}/per_token"
        nodes += [helper.make_node("Abs", [x], [f"{p}/abs"]),
                  helper.make_node("ReduceMax", [f"{p}/abs"], [f"{p}/max"], axes=[-1], keepdims=1),
                  helper.make_node("Max", [f"{p}/max", "pt_tiny"], [f"{p}/range"]),
                  helper.make_node("Mul", [f"{p}/range", "pt_inverse"], [f"{p}/scale"]),
                  helper.make_node("Div", ["pt_levels", f"{p}/range"], [f"{p}/step"]),
                  helper.make_node("Mul", [x, f"{p}/step"], [f"{p}/scaled"]),
                  # + 128.5 then truncation is round-half-up to an offset code in 1..255
                  helper.make_node("Add", [f"{p}/scaled", "pt_offset"], [f"{p}/shifted"]),
                  helper.make_node("Cast", [f"{p}/shifted"], [f"{p}/codes"], to=TensorProto.UINT8)]
        parts = [numpy_helper.to_array(weights[n.input[1]]).astype(np.float32) for n in group]
        codes, scales = quantize_weights(np.concatenate(parts, axis=1))
        w = f"{p}/weight"
        added += [numpy_helper.from_array(codes, f"{w}/codes"), numpy_helper.from_array(scales, f"{w}/scales")]
        out = group[0].output[0] if len(group) == 1 else f"{p}/product"
        nodes += [helper.make_node("MatMulIntegerToFloat", [f"{p}/codes", f"{w}/codes", "pt_one", f"{w}/scales",
                                                            "pt_zero"], [f"{p}/unscaled"], domain="com.microsoft"),
                  helper.make_node("Mul", [f"{p}/unscaled", f"{p}/scale"], [out])]
        if len(group) > 1:
            sizes = f"{p}/sizes"
            added.append(numpy_helper.from_array(np.array([a.shape[1] for a in parts], dtype=np.int64), sizes))
            nodes.append(helper.make_node("Split", [out, sizes], [n.output[0] for n in group], axis=-1))
    read = {name for n in nodes for name in n.input}
    kept = [t for t in graph.initializer if t.name in read]
    del graph.initializer[:]
    graph.initializer.extend(kept + [t for t in added if t.name in read])
    del graph.node[:]
    graph.node.extend(nodes)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(model, str(target))
