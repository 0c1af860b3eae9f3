"""Sentence encoders, one per backend, chosen by name (`BACKENDS`): the packaged
all-MiniLM-L6-v2, or a bi-encoder folder the user names (checked first by
`garden.retrievers._model_folder`).

- ``torch``: sentence-transformers itself (Reimers & Gurevych 2019, "Sentence-BERT").
- ``onnx``: the transformer exported once to ONNX (its attention written out as plain
  products, which ONNX Runtime runs faster than the fused kernel's export) and run by
  onnxruntime, then the model's own pooling: the mean of the last hidden state over attended
  tokens (or its first token's, for a model that pools by CLS), L2-normalized (Reimers &
  Gurevych 2019). At run time it needs only onnxruntime, tokenizers and numpy; torch and
  transformers are imported only to export.
- ``onnx-int8``: that export with its weight products in 8-bit integers, one scale per
  token (`garden.retrievers._int8`), so a text's vector does not depend on its batch.

Texts are tokenized first, sorted by token length (ties by position), run in batches of
similar length and put back in order: padding, most of the work on mixed lengths, is then
a few tokens a batch. A batch holds at most `batch_size` texts and `TOKENS_PER_BATCH`
tokens with its padding. Sessions use the cores this process may run on
(`session_threads`), without spin-waiting: on a shared machine a spinning thread takes a
core another process needs.

Exported files live in the user's cache (`garden.derived.cache`), a folder per model,
named by backend and a fingerprint of what they are made from, written whole or not at
all; one onnxruntime cannot load is removed with one warning and exported again. Weights
are read from safetensors only and no code of a model's own runs (`trust_remote_code` is
never set), offline.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import os
import tempfile
import warnings
from importlib import metadata
from pathlib import Path
from typing import Callable

import numpy as np

from garden._notice import warn
from garden.derived.cache import cache_folder
from garden.derived.home import private_path, refuse_link, remove_orphans, temp_prefix
from garden.errors import GardenError
from garden.retrievers._cache import ProcessCache
from garden.retrievers._int8 import SCHEME, quantize_per_token
from garden.retrievers._model_folder import max_length

BACKENDS = ("torch", "onnx", "onnx-int8")
# what the embedding cache calls each backend's vectors: a new name wherever the vectors change
# (the int8 backend's first scheme, one activation scale a batch, was cached as "onnx-int8")
SPACES = {"torch": "torch", "onnx": "onnx", "onnx-int8": "onnx-int8-per-token"}
MODEL_NAME = "all-MiniLM-L6-v2"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
# every load from a model folder: its files only, weights from safetensors only, no code of its own
SAFE_LOADING = {"local_files_only": True, "trust_remote_code": False}
OPSET = 17
ATTENTION = "eager"  # how the export writes attention: part of the files' fingerprint
TOKENS_PER_BATCH = 8192  # padded tokens a run may hold: bounds attention scores (32 texts of 256: 12 heads, 100 MB)
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "last_hidden_state"
PART = ".part"
EXPORT_HINT = "run `pip install onnx onnxruntime`, or use dense:backend=torch"


class Encoder:
    """Texts to float32 rows of unit length, shape (len(texts), dim)."""

    backend: str = ""
    dim: int = 0

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._encode(list(texts), batch_size)

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        raise NotImplementedError

class TorchEncoder(Encoder):
    """sentence-transformers on the CPU, as the `dense` retriever has always run it."""

    backend = "torch"

    def __init__(self, model_path: Path):
        quiet_transformers()
        import torch
        from sentence_transformers import SentenceTransformer

        torch.manual_seed(0)
        try:
            self.model = SentenceTransformer(str(model_path), device="cpu", model_kwargs={"use_safetensors": True},
                                             **SAFE_LOADING)
        except Exception as exc:   # transformers and torch fail in types of their own
            raise GardenError(f"dense:backend=torch: cannot load the model in {model_path} ({_reason(exc)})") from None
        width = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(width())

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        return self.model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False).astype(np.float32)


class OnnxEncoder(Encoder):
    """An exported transformer run by onnxruntime, then mean (or CLS) pooling and L2
    normalization."""

    def __init__(self, backend: str, model_path: Path, threads: int | None = None, spinning: bool = False,
                 name: str = MODEL_NAME, pooling: str = "mean"):
        """`threads` (default: `session_threads()`) and `spinning` are there for
        experiments/encoder_backends.py, which measures the choice against the others.
        `name` is the model's folder among the exports, `pooling` "mean" or "cls"."""
        try:
            import onnxruntime  # noqa: F401  (lazily: only these backends need it)
        except ImportError as exc:
            raise _cannot(backend, exc, name) from None
        self.backend = backend
        self.pool = POOLS[pooling]
        self.file, self.session = _ready_session(backend, model_path, threads or session_threads(), spinning, name)
        self.dim = int(json.loads((model_path / "config.json").read_text())["hidden_size"])
        self.tokenizer = _tokenizer(model_path)
        self._feeds = [i.name for i in self.session.get_inputs()]

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        return self.encode_batches(texts, lambda lengths: length_batches(lengths, batch_size, TOKENS_PER_BATCH))

    def encode_batches(self, texts: list[str], cut: Callable[[list[int]], list[list[int]]]) -> np.ndarray:
        """`texts` run in the batches `cut(token lengths)` gives (lists of positions), each
        padded to its longest text; rows come back in the order of `texts`."""
        encodings = self.tokenizer.encode_batch(texts)
        lengths = [len(e.ids) for e in encodings]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for rows in cut(lengths):
            width = max(lengths[i] for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                ids[r, :lengths[i]] = encodings[i].ids
                mask[r, :lengths[i]] = 1
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            (hidden,) = self.session.run([OUTPUT], {name: feeds[name] for name in self._feeds})
            out[rows] = self.pool(hidden, mask)
        return out


def length_batches(lengths: list[int], most_texts: int, most_tokens: int) -> list[list[int]]:
    """Positions sorted by length (ties by position), cut into batches of at most
    `most_texts` texts whose padded size (texts times the longest) stays within
    `most_tokens`; a text longer than that runs alone."""
    batches: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: (lengths[i], i)):
        if batches and len(batches[-1]) < most_texts and (len(batches[-1]) + 1) * lengths[i] <= most_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def session_threads() -> int:
    """The cores this process may run on (its affinity where the platform tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of the attended token vectors, L2-normalized (Reimers & Gurevych 2019); the clamps
    are sentence-transformers' (mask sum at 1e-9, norm at 1e-12), so an all-padding row stays finite."""
    weights = mask[:, :, None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    return _unit(pooled)


def cls_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The first token's vector ([CLS]), L2-normalized: the pooling of models trained so
    (sentence-transformers' `pooling_mode_cls_token`)."""
    return _unit(hidden[:, 0, :])


def _unit(pooled: np.ndarray) -> np.ndarray:
    norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return (pooled / norms).astype(np.float32)


POOLS = {"mean": mean_pool, "cls": cls_pool}


def _tokenizer(model_path: Path):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_path / "tokenizer.json"))
    # tokenizer.json ships fixed padding and truncation at 128; sentence-transformers truncates
    # at the model's max_seq_length (256 for MiniLM), and a batch is padded here, to its longest text
    tokenizer.enable_truncation(max_length=max_length(model_path))
    tokenizer.no_padding()
    return tokenizer


# --- exported files -----------------------------------------------------------------------------

def _version(package: str) -> str:
    try:
        return metadata.version(package)  # read from the install, without importing the package
    except metadata.PackageNotFoundError:
        return "absent"


@functools.lru_cache(maxsize=8)
def _digest(model_path: str, stamp: tuple) -> str:
    """sha256 of the weights and config.json; `stamp` (names, sizes, mtimes) keys the memo, so
    the 90 MB are hashed once per process unless the files change."""
    digests = []
    for name, _, _ in stamp:
        with open(Path(model_path) / name, "rb") as fh:
            digests.append(f"{name}:{hashlib.file_digest(fh, 'sha256').hexdigest()}")
    return " ".join(digests)


def encoder_fingerprint(backend: str, model_path: Path) -> str:
    """The backend and a fingerprint of what its vectors come from: "torch", or e.g.
    "onnx-int8-0123abcd4567ef89" (weights, config, the exporter's, opset's and runtime's
    versions, the quantization). Vectors cached under one are never read under another."""
    _check_backend(backend)
    if backend == "torch":
        return backend
    model_path = Path(model_path)
    files = sorted(p.name for p in model_path.glob("*.safetensors")) + ["config.json"]
    stamp = tuple((name, (st := os.stat(model_path / name)).st_size, st.st_mtime_ns) for name in files)
    made_with = [_digest(str(model_path), stamp), f"torch={_version('torch')}", f"opset={OPSET}",
                 f"attention={ATTENTION}", f"onnxruntime={_version('onnxruntime')}"]
    made_with += [SCHEME] if backend == "onnx-int8" else []
    return f"{backend}-{hashlib.sha256(' '.join(made_with).encode()).hexdigest()[:16]}"


def exported_file(backend: str, model_path: Path, name: str = MODEL_NAME) -> Path:
    """Where the backend's exported model is kept in the user's cache (made on first use),
    in the folder of the model `name`."""
    return cache_folder("models", name) / f"{encoder_fingerprint(backend, model_path)}.onnx"


def _reason(exc: BaseException, limit: int = 160) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:limit]


class CannotExport(GardenError):
    """The model cannot be exported to ONNX or run by ONNX Runtime (not the cache folder:
    that is a GardenError of its own); `reason` is why, in one line."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


def _cannot(backend: str, exc: BaseException, name: str = MODEL_NAME) -> GardenError:
    reason = _reason(exc)
    return CannotExport(f"dense:backend={backend}: cannot export or load {name} as ONNX ({reason}); {EXPORT_HINT}",
                        reason)


def export_blocker(backend: str, model_path: Path, name: str, pooling: str, content: str) -> str | None:
    """Why the ONNX `backend` cannot run this model, found by exporting it now when its
    file is not made yet (the architecture does not export, ONNX Runtime cannot run it), or
    None. A cache that cannot be written is not such a reason: its GardenError is raised."""
    if backend == "torch" or exported_file(backend, model_path, name).is_file():
        return None
    try:
        load_encoder(backend, model_path, name, pooling, content)
    except CannotExport as exc:
        return f"the export fails: {exc.reason}"
    return None


def _session(file: Path, threads: int, spinning: bool, name: str = MODEL_NAME):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # its load-time notes are not the user's concern
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL  # one product after another, each on every core
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    session = ort.InferenceSession(str(file), sess_options=options, providers=["CPUExecutionProvider"])
    names, outputs = {i.name for i in session.get_inputs()}, {o.name for o in session.get_outputs()}
    # a file that loads but is not our export is as unusable as a truncated one
    if not {"input_ids", "attention_mask"} <= names <= set(INPUTS) or OUTPUT not in outputs:
        raise ValueError(f"not an exported {name} (inputs {sorted(names)})")
    return session


def _ready_session(backend: str, model_path: Path, threads: int = 1, spinning: bool = False,
                   name: str = MODEL_NAME):
    """The backend's exported file and an onnxruntime session on it, exporting it first if it
    is missing or damaged."""
    file = exported_file(backend, model_path, name)
    refuse_link(file)
    # a file another user owns or may write could be any model: not loaded, exported anew
    file = private_path(file, "exported model")
    if file.exists():
        try:
            return file, _session(file, threads, spinning, name)
        except Exception as exc:  # onnxruntime fails in its own types: InvalidProtobuf, Fail, ...
            with contextlib.suppress(OSError):  # gone already: another process found it damaged
                file.unlink()
            warn(f"{file}: damaged exported model ({_reason(exc, 120)}); removed, it is exported again")
    _export(backend, model_path, file, name)
    try:
        return file, _session(file, threads, spinning, name)
    except Exception as exc:
        raise _cannot(backend, exc, name) from None


def _export(backend: str, model_path: Path, file: Path, name: str = MODEL_NAME) -> None:
    remove_orphans(file.parent, PART)
    try:
        if backend == "onnx":
            _write_whole(file, lambda tmp: _torch_export(model_path, tmp))
        else:
            source, _ = _ready_session("onnx", model_path, name=name)
            _write_whole(file, lambda tmp: quantize_per_token(source, tmp))
    except GardenError:
        raise
    except Exception as exc:
        cause = _os_error(exc)
        if cause is not None:   # the cache folder, not the packages: say so, not "install onnx"
            raise GardenError(f"dense:backend={backend}: cannot write the exported model in {file.parent} "
                              f"({cause.strerror or cause}); make the folder writable or point GARDEN_CACHE "
                              "at one that is, or use dense:backend=torch") from None
        raise _cannot(backend, exc, name) from None


def _os_error(exc: BaseException | None) -> OSError | None:
    """The OSError that caused `exc` (itself, or one in its chain), if any."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, OSError):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def _write_whole(file: Path, make: Callable[[Path], None]) -> None:
    """`make(tmp)` writes a file by path; it is made under a temporary name in the same folder
    and renamed, so no reader ever sees half a file, and of two processes exporting at once
    the last rename wins with a whole file."""
    fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=temp_prefix(file.name), suffix=PART)
    os.close(fd)
    try:
        make(Path(tmp))
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, file)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def quiet_transformers() -> None:
    # Set before huggingface_hub is first imported (it reads them once): no code path may try
    # the network; local_files_only says the same to each load.
    os.environ.update(OFFLINE)
    # and before torch is (its OpenMP reads it once): a waiting thread sleeps, as the ONNX
    # sessions' do, rather than spin on a core another process needs; on two loaded cores
    # spinning made a cross-encoder's reranking many times slower (docs/encoding.md).
    # A policy the user set is kept.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from transformers.utils import logging as hf_logging

    # a packet on stdout should not arrive behind a weight-loading bar on stderr
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def _torch_export(model_path: Path, target: Path) -> None:
    quiet_transformers()
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_path), attn_implementation=ATTENTION, use_safetensors=True,
                                      **SAFE_LOADING).eval()
    # a model whose forward takes no token types (RoBERTa-like ones do, MPNet's does not) is
    # exported without them; the encoder feeds what the session declares
    inputs = [name for name in INPUTS if name in inspect.signature(model.forward).parameters]

    class LastHidden(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *tensors):
            return self.inner(**dict(zip(inputs, tensors))).last_hidden_state

    # the example batch has padding: traced with an all-ones mask, the mask could be dropped
    ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=torch.int64) % model.config.vocab_size
    mask = (ids != 0).to(torch.int64)
    example = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
    axes = {0: "batch", 1: "sequence"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer notes on stderr are not the user's concern
        torch.onnx.export(LastHidden(model), tuple(example[name] for name in inputs), str(target),
                          input_names=inputs, output_names=[OUTPUT],
                          dynamic_axes={name: axes for name in (*inputs, OUTPUT)},
                          opset_version=OPSET, dynamo=False)


# --- loading ---------------------------------------------------------------------------------------

# loading one takes seconds: the packaged model and one of the user's, under each backend
ENCODERS: ProcessCache[Encoder] = ProcessCache(limit=2 * len(BACKENDS))


def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown encoder backend {backend!r}; valid backends: {', '.join(BACKENDS)}")


def load_encoder(backend: str, model_path: Path, name: str = MODEL_NAME, pooling: str = "mean",
                 content: str = "") -> Encoder:
    """The backend's encoder for the model at `model_path`, loaded once per process. `name`
    is its folder among the exports, `pooling` how the ONNX backends pool its tokens, and
    `content` what its files hash to (a folder changed on disk is a new encoder)."""
    _check_backend(backend)
    if backend == "torch":
        return ENCODERS.get((backend, str(model_path), content), lambda: TorchEncoder(Path(model_path)))
    # keyed by the cache folder too: a process that moves GARDEN_CACHE reads its own exports
    key = (backend, str(model_path), content, str(cache_folder("models", name, create=False)))
    return ENCODERS.get(key, lambda: OnnxEncoder(backend, Path(model_path), name=name, pooling=pooling))
