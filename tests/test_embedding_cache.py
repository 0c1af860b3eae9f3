"""The user's embedding cache (garden/derived/embeddings.py): shared by every checkout and
story, kept apart by model and backend, bounded, safe under concurrent writers, and healed
when damaged."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from model_cache import empty_cache

from garden.cli import main
from garden.derived.cache import parse_size, user_cache_dir
from garden.derived.embeddings import EmbeddingCache, cache_file, describe, used_bytes
from garden.pipelines.indexes import PROCESS_INDEXES
from garden.errors import GardenError
from garden.retrievers import Doc, make_retriever
from garden.retrievers.dense import QUERY_VECTORS

ROOT = Path(__file__).resolve().parents[1]
TINY = [Doc("d1", "The lighthouse keeper trims the lamp at dusk."),
        Doc("d2", "A recipe for lemon tart with a crisp pastry."),
        Doc("d3", "Granite quarries leave deep pools behind.")]
DIM = 384


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache of this test's own, and a garden home of its own."""
    monkeypatch.setenv("GARDEN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("GARDEN_CACHE_LIMIT", raising=False)
    return tmp_path / "cache"


@pytest.fixture
def dense_cache(cache, exported_model):
    """`cache`, holding the exported model for a dense retriever to load."""
    return empty_cache(cache, exported_model)


def warnings_in(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("garden: warning: ")]


def vectors(n: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def keys(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i:06d}" for i in range(n)]


def set_used(path: Path, prefix: str, when: int) -> None:
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE vectors SET used = ? WHERE key LIKE ?", (when, prefix + "%"))


def test_the_cache_is_per_user_by_default_and_moved_by_its_variable(monkeypatch, tmp_path):
    monkeypatch.delenv("GARDEN_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert user_cache_dir() == tmp_path / "xdg" / "pinecone-garden"
    monkeypatch.setenv("GARDEN_CACHE", str(tmp_path / "elsewhere"))
    assert user_cache_dir() == tmp_path / "elsewhere"


def test_vectors_round_trip_and_spaces_are_kept_apart(cache):
    rows = vectors(5, 1)
    EmbeddingCache("m/torch").add(keys("k", 5), rows)
    got = EmbeddingCache("m/torch").load(keys("k", 5), DIM)
    assert np.array_equal(np.stack([got[k] for k in keys("k", 5)]), rows)
    assert EmbeddingCache("m/onnx-int8").load(keys("k", 5), DIM) == {}   # another backend's vectors never read
    assert describe()["spaces"] == {"m/torch": 5}
    assert oct(cache_file().stat().st_mode & 0o777) == "0o600"


def test_every_checkout_shares_the_cache(dense_cache, tmp_path, monkeypatch):
    first = make_retriever("dense")
    first.index(TINY)
    assert first.encoded == len(TINY)
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / "another-checkout" / ".garden"))
    second = make_retriever("dense")
    second.index(TINY)
    assert second.encoded == 0
    assert not (tmp_path / "home" / "embeddings").exists()            # nothing kept per checkout


def test_damaged_rows_are_removed_and_encoded_again(dense_cache, capsys):
    healthy = make_retriever("dense")
    healthy.index(TINY)
    expected = healthy.score("a lamp by the sea")
    with closing(sqlite3.connect(cache_file())) as db, db:
        [(d1,), (d2,)] = db.execute("SELECT key FROM vectors WHERE space = ? ORDER BY key LIMIT 2",
                                    (healthy.cache.space,)).fetchall()   # two documents' rows, not the query's
        db.execute("UPDATE vectors SET vector = ? WHERE key = ?", (b"\x00" * 17, d1))            # torn
        db.execute("UPDATE vectors SET vector = ? WHERE key = ?",
                   (np.full(DIM, np.nan, dtype=np.float32).tobytes(), d2))                     # not numbers
    capsys.readouterr()
    again = make_retriever("dense")
    again.index(TINY)
    warned = warnings_in(capsys.readouterr().err)
    assert again.encoded == 2
    assert len(warned) == 1 and "2 damaged embedding entries" in warned[0] and str(cache_file()) in warned[0]
    scores = again.score("a lamp by the sea")
    assert all(abs(scores[k] - expected[k]) < 1e-5 for k in expected)
    third = make_retriever("dense")
    third.index(TINY)
    assert third.encoded == 0 and warnings_in(capsys.readouterr().err) == []


@pytest.mark.parametrize("damage", [
    lambda data: data[: len(data) // 3],            # truncated
    lambda data: b"not a database at all " * 100,  # overwritten
    lambda data: b"",                                # emptied: SQLite reads it as a new file
])
def test_a_damaged_cache_file_is_removed_and_rebuilt(dense_cache, capsys, damage):
    first = make_retriever("dense")
    first.index(TINY)
    path = cache_file()
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    path.write_bytes(damage(path.read_bytes()))
    capsys.readouterr()
    again = make_retriever("dense")
    again.index(TINY)
    err = capsys.readouterr().err
    assert again.encoded == len(TINY)
    warned = warnings_in(err)
    assert len(warned) <= 1 and all(str(path) in w for w in warned)
    assert make_retriever("dense").index(TINY) is None and describe()["spaces"]  # whole again


def test_a_dense_query_heals_a_damaged_cache_from_the_command_line(project, dense_cache, capsys):
    args = ["query", "aurora-ridge", "Why have I not felt like gaming recently?", "--pipeline", "dense", "--json"]
    assert main(args) == 0
    healthy = capsys.readouterr().out
    with closing(sqlite3.connect(cache_file())) as db, db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    cache_file().write_bytes(b"garbage" * 1000)
    PROCESS_INDEXES.clear()
    QUERY_VECTORS.clear()
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == json.loads(healthy)
    warned = warnings_in(err)
    assert len(warned) == 1 and str(cache_file()) in warned[0] and "Traceback" not in err


def test_past_its_limit_the_least_recently_used_go_first(cache, monkeypatch):
    store = EmbeddingCache("m/torch")
    old = int(time.time()) - 10 * 3600
    store.add(keys("a", 400), vectors(400, 1))
    set_used(cache_file(), "a", old)
    store.add(keys("b", 400), vectors(400, 2))
    set_used(cache_file(), "b", old + 3600)
    with closing(sqlite3.connect(cache_file())) as db:
        per_row = used_bytes(db) / 800
    monkeypatch.setenv("GARDEN_CACHE_LIMIT", str(int(per_row * 1000)))  # room for 1,000 rows
    assert len(store.load(keys("a", 400), DIM)) == 400   # read now: a is the most recently used
    store.add(keys("c", 400), vectors(400, 3))           # 1,200 rows: pruned to nine tenths of the limit
    held = {p: len(store.load(keys(p, 400), DIM)) for p in "abc"}
    assert held["a"] == 400 and held["c"] == 400, held
    assert 0 < held["b"] < 400, held                      # the least recently used went first, and only they
    assert describe()["bytes"] <= per_row * 1000 + 64 * 1024   # the file gave the pages back (slack allowed)


def test_processes_writing_at_once_lose_nothing(cache):
    script = (
        "import sys, numpy as np\n"
        "from garden.derived.embeddings import EmbeddingCache\n"
        "seed = int(sys.argv[1])\n"
        "store = EmbeddingCache('m/torch')\n"
        "for part in range(10):\n"
        "    ks = [f'{seed}-{part}-{i}' for i in range(100)] + [f'shared-{part}-{i}' for i in range(20)]\n"
        "    rows = np.ones((len(ks), 384), dtype=np.float32) / np.sqrt(384)\n"
        "    store.add(ks, rows)\n"
        "    assert len(store.load(ks, 384)) == len(ks)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(seed)], env=env, stderr=subprocess.PIPE)
             for seed in (1, 2, 3)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()
    assert describe()["spaces"] == {"m/torch": 3 * 1000 + 200}


@pytest.mark.parametrize("text, size", [("2G", 2 * 1024**3), ("500M", 500 * 1024**2), ("1048576", 1024**2),
                                        ("3 GiB", 3 * 1024**3)])
def test_a_cache_limit_reads_as_a_size(text, size):
    assert parse_size(text, "GARDEN_CACHE_LIMIT") == size


@pytest.mark.parametrize("text", ["lots", "0", "12K", "-1G", "2X"])
def test_a_bad_cache_limit_is_one_line(project, cache, monkeypatch, capsys, text):
    with pytest.raises(GardenError, match="GARDEN_CACHE_LIMIT"):
        parse_size(text, "GARDEN_CACHE_LIMIT")
    monkeypatch.setenv("GARDEN_CACHE_LIMIT", text)
    assert main(["query", "aurora-ridge", "gaming", "--pipeline", "bm25"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "GARDEN_CACHE_LIMIT" in err[0]


def test_a_cache_that_is_a_file_is_one_line(project, cache, monkeypatch, capsys):
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text("not a folder")
    assert main(["query", "aurora-ridge", "gaming", "--pipeline", "bm25"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"GARDEN_CACHE={cache}" in err[0] and "not a folder" in err[0]
    assert cache.read_text() == "not a folder"


def test_a_link_inside_the_cache_is_refused(cache, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    cache.mkdir()
    (cache / "embeddings").symlink_to(outside, target_is_directory=True)
    with pytest.raises(GardenError, match="is a symbolic link"):
        EmbeddingCache("m/torch").add(keys("k", 1), vectors(1, 1))
    assert list(outside.iterdir()) == []


def test_doctor_reports_the_cache(project, cache, capsys):
    EmbeddingCache("m/torch").add(keys("k", 3), vectors(3, 1))
    main(["doctor"])
    out = capsys.readouterr().out
    [line] = [line for line in out.splitlines() if line.startswith("embedding cache ")]
    assert str(cache_file()) in line and "m/torch: 3 vectors" in line and "2048 MiB" in line


def test_a_query_is_encoded_once_per_user_and_alike_alone_or_in_a_batch(dense_cache):
    questions = ["who trims the lamp?", "what is in the tart?", "where do quarries leave pools?"]
    first = make_retriever("dense")
    first.index(TINY)
    QUERY_VECTORS.clear()
    batch = first.top_many(questions, 3)
    assert first.queries_encoded == 3
    assert describe()["spaces"][first.query_cache.space] == 3   # kept beside the documents, in a space of its own
    alone = [first.query_vector(q) for q in questions]
    # as another process would: nothing remembered in memory, the user's cache read
    QUERY_VECTORS.clear()
    second = make_retriever("dense")
    second.index(TINY)
    again = second._query_vectors(list(reversed(questions)))
    assert second.queries_encoded == 0 and second.encoded == 0
    assert all(np.array_equal(a, b) for a, b in zip(alone, reversed(list(again))))
    assert [[d for d, _ in ranked] for ranked in batch] == [[d for d, _ in second.top(q, 3)] for q in questions]
