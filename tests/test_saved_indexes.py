"""Saved indexes (garden/pipelines/indexes.py): a second process loads what the first built,
an edited story is rebuilt, a damaged or interrupted save never stands in for an index."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from garden._state import read_state
from garden.pipelines.indexes import COUNTS, IndexCache, fresh_builds, saved_path
from garden.errors import GardenError
from garden.formats.stories import load_story

RETRIEVERS = ("bm25", "bm25s", "tfidf", "dense", "hybrid")
QUERY = "Why have I not felt like gaming recently?"

COUNT_SCRIPT = """
import json, sys
from garden import api
from garden.pipelines.indexes import COUNTS
packet = api.query("aurora-ridge", sys.argv[1])
for name in ("bm25", "bm25s", "tfidf", "dense", "hybrid"):
    api.query("aurora-ridge", sys.argv[1], pipeline=name)
print(json.dumps({"counts": dict(COUNTS), "ids": [i["id"] for i in packet["items"]]}))
"""


def in_new_process(project: Path, query: str = QUERY) -> dict:
    env = {**os.environ, "GARDEN_HOME": str(project / ".garden"), "GARDEN_TRACE": "0"}
    done = subprocess.run([sys.executable, "-c", COUNT_SCRIPT, query], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_second_process_loads_every_index_instead_of_building_it(project):
    first = in_new_process(project)
    kinds = [f"retriever:{n}" for n in RETRIEVERS] + ["phrase"]
    assert all(first["counts"].get(f"{k}:built") == 1 for k in kinds), first
    assert not any(k.endswith(":loaded") for k in first["counts"])
    second = in_new_process(project)
    assert all(second["counts"].get(f"{k}:loaded") == 1 for k in kinds), second
    assert not any(k.endswith(":built") for k in second["counts"]), second
    assert second["ids"] == first["ids"] and first["ids"]
    # an edited story has other content: its indexes are built again, and the old saves go
    story = project / "fixtures" / "aurora-ridge.yaml"
    story.write_text(story.read_text(encoding="utf-8").replace("Lately I have not felt like playing games.",
                                                                "Lately I have not felt like playing board games."),
                     encoding="utf-8")
    third = in_new_process(project)
    assert all(third["counts"].get(f"{k}:built") == 1 for k in kinds), third
    saved = sorted(p.name for p in (project / ".garden" / "index").glob("aurora-ridge.*.npz")
                   if ".story." not in p.name and ".table_" not in p.name)  # tests/test_saved_story.py
    assert len(saved) == len(kinds), saved  # one save per kind: the stale ones removed


@pytest.mark.parametrize("name", RETRIEVERS)
def test_a_loaded_index_ranks_as_the_built_one(project, name):
    story = load_story("fixtures/aurora-ridge.yaml")
    built = IndexCache().retriever(story, name)
    before = dict(COUNTS)
    loaded = IndexCache().retriever(story, name)
    assert COUNTS[f"retriever:{name}:loaded"] == before.get(f"retriever:{name}:loaded", 0) + 1
    assert loaded is not built
    for query in (QUERY, "camp stove", "冰川"):
        a, b = built.top(query, 10), loaded.top(query, 10)
        # same code path on the same arrays: ids exactly, scores to 1e-9
        assert [d for d, _ in a] == [d for d, _ in b]
        assert all(abs(x - y) <= 1e-9 for (_, x), (_, y) in zip(a, b))


def test_a_damaged_save_is_removed_and_rebuilt(project, capsys):
    story = load_story("fixtures/aurora-ridge.yaml")
    IndexCache().retriever(story, "bm25s")
    path = saved_path(story, "retriever:bm25s")
    path.write_bytes(path.read_bytes()[:40])  # torn by a disk fault
    built = COUNTS["retriever:bm25s:built"]
    retriever = IndexCache().retriever(story, "bm25s")
    assert COUNTS["retriever:bm25s:built"] == built + 1
    assert "saved index does not load" in capsys.readouterr().err
    assert retriever.top("camp stove", 1) and path.stat().st_size > 40


def _saves(story) -> IndexCache:
    cache = IndexCache()
    cache.retriever(story, "bm25s"), cache.retriever(story, "bm25"), cache.phrase_index(story)
    return cache


def _reload(kind: str, story):
    fresh = IndexCache()
    return fresh.phrase_index(story) if kind == "phrase" else fresh.retriever(story, kind.split(":")[1])


@pytest.mark.parametrize("kind, other", [("retriever:bm25s", "retriever:bm25"), ("retriever:bm25", "phrase"),
                                         ("phrase", "retriever:bm25s")])
def test_a_save_of_another_index_is_removed_and_rebuilt(project, capsys, kind, other):
    """A save of another kind copied to this one's name loads as nothing: its header says
    what it is (a pickle that unpickled to another type used to fail every query, and stay)."""
    story = load_story("fixtures/aurora-ridge.yaml")
    _saves(story)
    path = saved_path(story, kind)
    path.write_bytes(saved_path(story, other).read_bytes())
    built = COUNTS[f"{kind}:built"]
    value = _reload(kind, story)
    assert COUNTS[f"{kind}:built"] == built + 1
    assert f"saved index is not a {kind} of this garden" in capsys.readouterr().err
    assert read_state(path, kind, type(value).__qualname__).arrays     # the rebuilt index took its place


@pytest.mark.parametrize("content", ["pickled int", "pickled dict", "object array", "no header", "empty"])
def test_a_file_that_is_not_a_save_is_removed_and_rebuilt(project, capsys, content):
    import io
    import pickle

    story = load_story("fixtures/aurora-ridge.yaml")
    _saves(story)
    path = saved_path(story, "retriever:bm25")
    buffer = io.BytesIO()
    if content == "object array":
        np.savez(buffer, __header__=np.frombuffer(b"{}", dtype=np.uint8), ids=np.array([{"a": 1}], dtype=object))
    elif content == "no header":
        np.savez(buffer, ids=np.arange(3))
    elif content != "empty":
        buffer.write(pickle.dumps(42 if content == "pickled int" else {"idf": {}}))
    path.write_bytes(buffer.getvalue())
    retriever = _reload("retriever:bm25", story)
    assert "saved index does not load" in capsys.readouterr().err
    assert retriever.top("camp stove", 1)
    assert read_state(path, "retriever:bm25", "RankBM25").arrays


def test_an_interrupted_save_leaves_the_previous_index_in_place(project, monkeypatch):
    story = load_story("fixtures/aurora-ridge.yaml")
    IndexCache().retriever(story, "bm25s")
    old = saved_path(story, "retriever:bm25s")
    old_bytes = old.read_bytes()
    edited = story.model_copy(update={"records": story.records[:-1]})
    edited.__dict__.pop("_key", None)
    edited.__dict__.pop("_by_id", None)

    def killed(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        IndexCache().retriever(edited, "bm25s")
    monkeypatch.undo()
    folder = old.parent
    assert old.read_bytes() == old_bytes                    # the previous index, untouched
    assert not saved_path(edited, "retriever:bm25s").exists()  # no half-written new one
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_fresh_builds_read_no_save_and_a_link_is_refused(project):
    story = load_story("fixtures/aurora-ridge.yaml")
    IndexCache().retriever(story, "bm25")
    built = COUNTS["retriever:bm25:built"]
    from garden.pipelines.indexes import PROCESS_INDEXES

    with fresh_builds():
        PROCESS_INDEXES.retriever(story, "bm25")
    assert COUNTS["retriever:bm25:built"] == built + 1
    path = saved_path(story, "retriever:tfidf")
    target = project / "elsewhere.pkl"
    target.write_bytes(b"not an index")
    path.symlink_to(target)
    with pytest.raises(GardenError, match="link"):
        IndexCache().retriever(story, "tfidf")
    assert target.read_bytes() == b"not an index"


class _RunsOnLoad:
    """A pickle that writes a marker file as it is loaded: what a planted index could do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "ran"))


@pytest.mark.parametrize("how", ["private to this user", "group-readable", "another owner"])
def test_a_planted_pickle_never_runs(project, capsys, monkeypatch, how):
    """A save is arrays read with pickle refused: a pickle at a save's name runs nothing,
    even one this user owns with mode 0600 (which a pickle-format save used to load)."""
    import pickle

    story = load_story("fixtures/aurora-ridge.yaml")
    IndexCache().retriever(story, "bm25s")
    path = saved_path(story, "retriever:bm25s")
    marker = project / "ran.txt"
    path.write_bytes(pickle.dumps(_RunsOnLoad(marker)))
    os.chmod(path, 0o600)
    if how == "group-readable":
        os.chmod(path, 0o640)
    elif how == "another owner":
        monkeypatch.setattr(os, "geteuid", lambda: os.stat(path).st_uid + 1)
    retriever = IndexCache().retriever(story, "bm25s")
    assert not marker.exists(), "the planted pickle ran"
    err = capsys.readouterr().err
    if how == "private to this user":
        assert "saved index does not load" in err and "pickle" in err
    elif how == "group-readable":
        assert "saved index not loaded: mode 0640 lets others read or write it" in err
    else:
        assert "saved index not loaded: owned by uid" in err
    assert retriever.top("camp stove", 1)
    monkeypatch.undo()
    assert os.stat(path).st_mode & 0o077 == 0      # the rebuilt save replaced it, private again
    assert read_state(path, "retriever:bm25s", "BM25S").arrays


def test_a_save_of_an_earlier_format_is_removed_when_the_new_one_lands(project):
    story = load_story("fixtures/aurora-ridge.yaml")
    path = saved_path(story, "retriever:bm25")
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.with_name(path.name.replace(path.name.split(".")[-2], "0" * 32)).with_suffix(".pkl")
    old.write_bytes(b"an old pickle")
    IndexCache().retriever(story, "bm25")
    assert path.exists() and not old.exists()


def test_a_save_made_by_other_index_code_is_not_served(project, tmp_path, monkeypatch):
    """A saved index's name hashes the source of the code that built it: after a change to
    a retriever's `index()` (here its module's source, as a new checkout would have it) the
    old save is never read; the code as it was reads it again."""
    from garden.derived import tables
    from garden.retrievers import bm25

    story = load_story("fixtures/aurora-ridge.yaml")
    IndexCache().retriever(story, "bm25")
    old = saved_path(story, "retriever:bm25")
    assert old.is_file()
    original = bm25.__file__
    source = Path(original).read_text(encoding="utf-8")
    signature = "    def index(self, docs: Sequence[Doc]) -> None:\n"
    assert source.count(signature) == 1
    changed = tmp_path / "bm25.py"
    changed.write_text(source.replace(signature, signature + "        docs = list(docs)  # a changed rule\n"),
                       encoding="utf-8")
    monkeypatch.setattr(bm25, "__file__", str(changed))
    monkeypatch.setattr(tables, "_CODE", {})
    new = saved_path(story, "retriever:bm25")
    assert new != old
    loaded, built = COUNTS["retriever:bm25:loaded"], COUNTS["retriever:bm25:built"]
    IndexCache().retriever(story, "bm25")
    assert (COUNTS["retriever:bm25:loaded"], COUNTS["retriever:bm25:built"]) == (loaded, built + 1)
    assert new.is_file() and not old.exists()   # the new code's save replaced the old one
    monkeypatch.setattr(bm25, "__file__", original)
    monkeypatch.setattr(tables, "_CODE", {})
    assert saved_path(story, "retriever:bm25") == old   # the code as it was names the old save again
