"""A model folder the user names (`dense:model=DIR`, `cross:model=DIR`), checked before
anything in it is loaded.

What is loaded is data, never code, and never from anywhere but the folder:

- **Weights from safetensors only.** A pickle runs whatever it holds as it loads (the
  reason Hugging Face made safetensors, and transformers' own warning on
  `torch.load`): a folder whose weights are pickled (`pytorch_model.bin`, `*.pt`,
  `*.ckpt`) and not also kept as safetensors beside them is refused, naming the file.
- **No code of the model's own.** `auto_map` in `config.json` or `tokenizer_config.json`
  (transformers' remote code) is refused, and so is a module in `modules.json` that is not
  one of sentence-transformers' own classes; the loaders are called with
  `trust_remote_code=False` besides, and offline (`_encoders.OFFLINE`).
- **Nothing from outside the folder.** Every file is a regular file; a link is followed
  only when it stays inside the folder (a Hugging Face cache's snapshot links each file
  to a blob outside it: copy it with `cp -rL` first).
- **One located line** for a missing, damaged or mismatched file: the file, the field and
  what is wrong (a safetensors header that does not cover its file, a config whose widths
  are not the weights', a tokenizer with more tokens than the model embeds).

The folder's content (`digest`: the sha256 of every file loading may read, by name: the
weights, the configs, the tokenizer) names its vectors in the embedding cache and its
exports, so two models never share a vector and a folder changed on disk is encoded
again. It is hashed once per process for each stamp of its files (names, sizes, times).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

from garden.errors import GardenError

PICKLED = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
READ = (".safetensors", ".json", ".txt", ".model", ".vocab")   # what loading reads: hashed, so a change re-encodes
CODE_CONFIGS = ("config.json", "tokenizer_config.json")       # where transformers looks for auto_map
OWN_MODULES = "sentence_transformers."
MAX_HEADER = 100 * 1024**2   # a safetensors header past this is damage, not a model (the format's own bound)
MAX_JSON = 64 * 1024**2      # a config or tokenizer past this is not one
MAX_FILES = 10_000           # a model's folder holds tens of files; more is a folder named by mistake (a home)
LINK_HINT = "copy the model in with its files (cp -rL) and name the copy"
SAFETENSORS_HINT = ("save it as safetensors first (model.save_pretrained(DIR, safe_serialization=True), "
                    "or sentence-transformers' model.save(DIR))")
POOLING_MODES = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens",
                 "max": "pooling_mode_max_tokens", "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens",
                 "weightedmean": "pooling_mode_weightedmean_tokens", "lasttoken": "pooling_mode_lasttoken"}
ONNX_POOLING = ("mean", "cls")   # what the ONNX backends pool (_encoders.pool)


@dataclass(frozen=True)
class ModelFolder:
    """A checked model folder: where it is, what its files hash to and what loading reads."""

    path: Path
    where: str                   # how refusals name it: `dense:model=DIR`
    digest: str                  # sha256 over the files loading reads, by name
    config: dict                 # config.json
    modules: tuple[dict, ...]    # modules.json's entries (empty for a plain transformers folder)

    @property
    def label(self) -> str:
        """The model in the cache's keys and export folder: its folder's name (as a file
        name may hold it) and content."""
        return f"{re.sub(r'[^A-Za-z0-9_.-]', '_', self.path.name)}@sha256-{self.digest[:16]}"

    def file(self, name: str) -> Path:
        return self.path / name


def folder_option(value) -> str:
    """A `model` option's value: a folder's path as text (a path object read as its text).
    The folder itself is checked when the retriever is made (`model_folder`)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError("not a folder")
    return value


def _refusal(where: str, path: Path | str, problem: str) -> GardenError:
    return GardenError(f"{where}: {path}: {problem}")


def _read_json(where: str, path: Path, required: bool = True) -> dict | list | None:
    """A JSON file of the folder, or None when absent and not `required`."""
    try:
        if path.stat().st_size > MAX_JSON:
            raise _refusal(where, path, f"is {path.stat().st_size:,} bytes; a model's JSON file is read up to "
                           f"{MAX_JSON:,}")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if not required:
            return None
        raise _refusal(where, path, "missing; a model folder holds its config.json") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _refusal(where, path, f"cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise _refusal(where, path, f"damaged: not JSON ({exc})") from None


def _files(where: str, root: Path) -> list[str]:
    """Every file under `root`, relative, sorted: regular files reached without leaving it;
    a link that leads out, or anything that is not a file or a folder, refused. Hidden
    folders (`.git`, `.cache`) are passed over: no loader reads them. At most MAX_FILES."""
    found: list[str] = []
    for folder, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if len(found) + len(names) > MAX_FILES:
            raise _refusal(where, root, f"holds more than {MAX_FILES:,} files; name the folder that holds the "
                           "model's config.json")
        for name in sorted(dirs + names):
            path = Path(folder) / name
            try:
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    target = path.resolve(strict=True)
                    if not target.is_relative_to(root):
                        raise _refusal(where, path, f"a link to {target}, outside the model folder; {LINK_HINT}")
                    st = os.stat(target)
            except OSError as exc:
                raise _refusal(where, path, f"cannot be read ({exc.strerror or exc})") from None
            if stat.S_ISDIR(st.st_mode):
                if stat.S_ISLNK(os.lstat(path).st_mode):   # os.walk does not enter it: its files must be checked too
                    raise _refusal(where, path, f"a linked folder; {LINK_HINT}")
                continue
            if not stat.S_ISREG(st.st_mode):
                raise _refusal(where, path, "not a regular file; a model folder holds files")
            found.append(str(path.relative_to(root)))
    return sorted(found)


def _check_weights(where: str, root: Path, files: list[str]) -> None:
    """safetensors beside every pickled weight file, and at least one of them."""
    safe = {str(Path(f).parent) for f in files if f.endswith(".safetensors")}
    for name in files:
        if name.endswith(PICKLED) and str(Path(name).parent) not in safe:
            raise _refusal(where, root / name, "pickled weights, which run code as they load, are never loaded; "
                           + SAFETENSORS_HINT)
    if "." not in safe:
        raise _refusal(where, root / "model.safetensors", "missing; the model's weights are read from safetensors "
                       "only")


def safetensors_header(where: str, path: Path) -> dict:
    """The header of a safetensors file (Hugging Face's format: an 8-byte little-endian
    length, that many bytes of JSON, the tensors), checked to describe the whole file."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            (length,) = struct.unpack("<Q", head) if len(head) == 8 else (None,)
            if length is None or length > min(MAX_HEADER, size - 8):
                raise _refusal(where, path, f"damaged: a safetensors header of {length} bytes in a file of {size:,}")
            header = json.loads(fh.read(length))
    except OSError as exc:
        raise _refusal(where, path, f"cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise _refusal(where, path, f"damaged: its safetensors header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise _refusal(where, path, "damaged: its safetensors header is not a mapping")
    end = 0
    for name, tensor in header.items():
        if name == "__metadata__":
            continue
        offsets = tensor.get("data_offsets") if isinstance(tensor, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
            raise _refusal(where, path, f"damaged: tensor {name} has no data_offsets")
        end = max(end, offsets[1])
    if 8 + length + end != size:
        raise _refusal(where, path, f"damaged: its tensors end at byte {8 + length + end:,}, the file at {size:,} "
                       "(truncated or overwritten)")
    return header


def _check_widths(where: str, root: Path, config: dict, files: list[str]) -> None:
    """The word embeddings in the weights have the shape config.json says, and the
    tokenizer holds no token the model cannot embed."""
    vocab, hidden = config.get("vocab_size"), config.get("hidden_size")
    for name in files:
        if not name.endswith(".safetensors") or "/" in name:
            continue
        header = safetensors_header(where, root / name)
        for tensor, info in header.items():
            if tensor.endswith("embeddings.word_embeddings.weight") and isinstance(info, dict):
                shape = info.get("shape")
                if isinstance(shape, list) and len(shape) == 2 and [vocab, hidden] != shape \
                        and isinstance(vocab, int) and isinstance(hidden, int):
                    raise _refusal(where, root / "config.json", f"vocab_size {vocab} and hidden_size {hidden} do not "
                                   f"match {name}'s {tensor} of shape {shape}")
    tokenizer = root / "tokenizer.json"
    if isinstance(vocab, int) and tokenizer.is_file():
        data = _read_json(where, tokenizer)
        model = data.get("model") if isinstance(data, dict) else None
        tokens = model.get("vocab") if isinstance(model, dict) else None
        added = [t.get("id") for t in data.get("added_tokens") or [] if isinstance(t, dict)] \
            if isinstance(data, dict) else []
        ids = [*(tokens.values() if isinstance(tokens, dict) else []),
               *(i for i in added if isinstance(i, int))]
        if ids and max(ids) >= vocab:
            raise _refusal(where, tokenizer, f"model.vocab has token id {max(ids)}, past config.json's vocab_size "
                           f"{vocab}: the tokenizer is not this model's")


def _check_code(where: str, root: Path, config: dict, modules: list) -> None:
    for name in CODE_CONFIGS:
        data = config if name == "config.json" else _read_json(where, root / name, required=False)
        if isinstance(data, dict) and data.get("auto_map"):
            raise _refusal(where, root / name, "auto_map names code of the model's own, and the garden runs no "
                           "code from a model folder (remote code)")
    for entry in modules:
        kind = entry.get("type") if isinstance(entry, dict) else None
        if not isinstance(kind, str) or not kind.startswith(OWN_MODULES):
            raise _refusal(where, root / "modules.json", f"module type {kind!r} is not one of sentence-transformers' "
                           "own: a custom module is code of the model's own, which the garden does not run")
        if not isinstance(entry.get("path", ""), str) or ".." in Path(entry.get("path", "")).parts \
                or Path(entry.get("path", "")).is_absolute():
            raise _refusal(where, root / "modules.json", f"module path {entry.get('path')!r} leaves the model folder")


@functools.lru_cache(maxsize=8)
def _digest(root: str, stamp: tuple) -> str:
    """sha256 over each file's name and sha256; `stamp` (names, sizes, times) keys the memo."""
    outer = hashlib.sha256()
    for name, _, _ in stamp:
        with open(Path(root) / name, "rb") as fh:
            outer.update(f"{name}\0{hashlib.file_digest(fh, 'sha256').hexdigest()}\n".encode())
    return outer.hexdigest()


def content_digest(root: Path, files: list[str]) -> str:
    """The sha256 of the files loading reads (`READ`), by name and content."""
    read = [name for name in files if name.endswith(READ)]
    stamp = tuple((name, (st := os.stat(root / name)).st_size, st.st_mtime_ns) for name in read)
    return _digest(str(root), stamp)


def model_folder(text: str, where: str) -> ModelFolder:
    """The folder `text` names, checked by the rules of the module's docstring, or
    GardenError: one line naming the file and what is wrong with it."""
    root = Path(text).expanduser()
    try:
        if not root.is_dir():
            raise _refusal(where, root, "no such folder" if not root.exists() else "not a folder; name the folder "
                           "that holds the model's config.json")
        root = root.resolve(strict=True)
    except OSError as exc:
        raise _refusal(where, root, f"cannot be read ({exc.strerror or exc})") from None
    config = _read_json(where, root / "config.json")   # first: a folder without one is refused before it is walked
    files = _files(where, root)
    if not isinstance(config, dict):
        raise _refusal(where, root / "config.json", "damaged: not a JSON object")
    modules = _read_json(where, root / "modules.json", required=False) or []
    if not isinstance(modules, list):
        raise _refusal(where, root / "modules.json", "damaged: not a JSON list of modules")
    _check_code(where, root, config, modules)
    _check_weights(where, root, files)
    _check_widths(where, root, config, files)
    return ModelFolder(root, where, content_digest(root, files), config, tuple(modules))


# --- what a bi-encoder folder says about its vectors --------------------------------------------


def _module(folder: ModelFolder, name: str) -> dict | None:
    """The first module whose type's class is `name` (`Pooling`), else None."""
    return next((m for m in folder.modules if m["type"].rsplit(".", 1)[-1] == name), None)


def pooling(folder: ModelFolder) -> tuple[str, ...]:
    """The pooling modes of its Pooling module (old and new configuration alike), empty
    where it has none."""
    module = _module(folder, "Pooling")
    if module is None:
        return ()
    config = _read_json(folder.where, folder.path / module.get("path", "") / "config.json")
    if not isinstance(config, dict):
        raise _refusal(folder.where, folder.path / module.get("path", "") / "config.json", "damaged: not a JSON object")
    if isinstance(config.get("pooling_mode"), str):   # sentence-transformers 6 writes one name
        return (config["pooling_mode"],)
    return tuple(mode for mode, key in POOLING_MODES.items() if config.get(key))


def onnx_blocker(folder: ModelFolder) -> str | None:
    """Why the ONNX backends cannot run this bi-encoder, or None: they run a transformer,
    then mean or CLS pooling and L2 normalization, nothing more, on the text as given (no
    default prompt), tokenized by its tokenizer.json."""
    kinds = [m["type"].rsplit(".", 1)[-1] for m in folder.modules]
    if [k for k in kinds if k != "Normalize"] != ["Transformer", "Pooling"] or folder.modules[0].get("path", ""):
        return f"its modules are {' -> '.join(kinds) or 'none'}, not a transformer, pooling and normalization"
    modes = pooling(folder)
    if len(modes) != 1 or modes[0] not in ONNX_POOLING:
        return f"it pools by {'+'.join(modes) or 'nothing'}, not by {' or '.join(ONNX_POOLING)}"
    if not (folder.path / "tokenizer.json").is_file():
        return "it has no tokenizer.json"
    settings = _read_json(folder.where, folder.path / "config_sentence_transformers.json", required=False)
    if isinstance(settings, dict) and settings.get("default_prompt_name"):
        # sentence-transformers puts it before every text; the exported network reads the text alone
        return f"it puts its prompt {settings['default_prompt_name']!r} before every text"
    return None


def embedding_width(folder: ModelFolder) -> int:
    """The width of its sentence vectors, from its files (no model is loaded): the last
    Dense module's out_features, else the pooled width (the transformer's hidden_size
    times the pooling modes)."""
    width = folder.config.get("hidden_size") or folder.config.get("d_model") or folder.config.get("dim")
    for module in folder.modules:
        kind = module["type"].rsplit(".", 1)[-1]
        if kind == "Pooling":
            width = (width or 0) * max(1, len(pooling(folder)))
        elif kind == "Dense":
            config = _read_json(folder.where, folder.path / module.get("path", "") / "config.json")
            width = config.get("out_features") if isinstance(config, dict) else None
    if not isinstance(width, int) or width < 1:
        raise _refusal(folder.where, folder.path / "config.json", "hidden_size: not the width of a model's vectors")
    return width


def max_length(path: Path) -> int:
    """The tokens a text is cut to, as sentence-transformers reads it: sentence_bert_config's
    max_seq_length, else the tokenizer's model_max_length, at most the model's positions."""
    positions = json.loads((path / "config.json").read_text(encoding="utf-8")).get("max_position_embeddings")
    for name, key in (("sentence_bert_config.json", "max_seq_length"), ("tokenizer_config.json", "model_max_length")):
        try:
            value = json.loads((path / name).read_text(encoding="utf-8")).get(key)
        except (OSError, ValueError):
            continue
        if isinstance(value, int) and value > 0:
            return min(value, positions) if isinstance(positions, int) else value
    return positions if isinstance(positions, int) else 512
