"""The saved story and whole-store tables (garden/store/stored.py, tables.py): every packet
and trace the same with and without them, a changed file never served from a stale save, a
damaged, foreign or other user's save refused and made again, a query reading only what it
touches."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from garden.pipelines import indexes
from garden.pipelines.indexes import COUNTS
from garden.store.stored import OPENED, open_story
from garden.derived.tables import in_memory
from garden.evaluation.runner import PRUNE_TRACES, run_query
from garden.formats.cases import load_case, spec_for
from garden.formats.stories import load_story

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "conv-30.json"
LOCOMO_QUESTIONS = 30
QUERY = "Why have I not felt like gaming recently?"


def _lines(case_files: list[Path], read) -> dict:
    """Every query of the cases under `default` (stories read by `read`): the trace line each
    writes, timings aside, by (case, its place among the case's queries)."""
    from garden.derived.home import derived_dir

    PRUNE_TRACES.reset()
    folder = derived_dir() / "traces"
    before = {p: p.read_text(encoding="utf-8") for p in folder.glob("*.jsonl")} if folder.is_dir() else {}
    stories: dict[Path, object] = {}
    keys = []
    for case_file in case_files:
        loaded = load_case(case_file)
        for n, q in enumerate(loaded.queries):
            if q.expect.build_error:
                continue
            story = stories.get(q.story_path) or stories.setdefault(q.story_path, read(q.story_path))
            run_query(spec_for(q, story), "default", case=loaded.id, trace=True, case_path=str(case_file))
            keys.append((loaded.id, n))
    written = []
    for path in sorted(folder.glob("*.jsonl")):
        text = path.read_text(encoding="utf-8")
        written += text[len(before.get(path, "")):].splitlines()
    assert len(written) == len(keys)
    out = {}
    for key, line in zip(keys, written):
        event = json.loads(line)
        event.pop("timings_ms")
        out[key] = event
    return out


def _both_ways(case_files: list[Path]) -> tuple[dict, dict]:
    with in_memory():
        without = _lines(case_files, load_story)
    _lines(case_files, open_story)          # the first process: reads the files, saves stories and tables
    OPENED.clear()
    before = COUNTS.copy()
    with_saves = _lines(case_files, open_story)
    read = {k: COUNTS[k] - before[k] for k in COUNTS if COUNTS[k] != before[k]}
    # the second pass read every story and every table from its save and made none
    assert read.get("story:loaded", 0) >= 1 and not read.get("story:built")
    assert any(k.startswith("table:") and k.endswith(":loaded") for k in read), read
    assert not any(k.startswith("table:") and k.endswith(":built") for k in read), read
    return without, with_saves


def test_every_shipped_case_packs_and_traces_the_same_from_the_saves(project):
    files = sorted([*(project / "regression").rglob("*.yaml"), *(project / "challenge").rglob("*.yaml")])
    without, with_saves = _both_ways(files)
    assert len(without) >= 79   # every query of the 27 shipped cases, controls included
    assert with_saves == without


@pytest.mark.skipif(not LOCOMO.is_file(), reason=f"the LoCoMo data is not at {LOCOMO} (shared data, not shipped)")
def test_locomo_questions_pack_and_trace_the_same_from_the_saves(home):
    from garden.formats.locomo import import_locomo

    import_locomo(LOCOMO, home)
    files = sorted((home / "cases").rglob("*.yaml"))[:LOCOMO_QUESTIONS]
    without, with_saves = _both_ways(files)
    assert len(without) >= LOCOMO_QUESTIONS
    assert with_saves == without


def test_a_saved_story_is_the_story_and_a_query_reads_only_what_it_touches(project):
    from garden import api

    path = project / "fixtures" / "aurora-ridge.yaml"
    api.query("aurora-ridge", QUERY)                      # reads the file, saves it
    OPENED.clear()
    saved = open_story(path)
    made = saved.records._made
    assert COUNTS["story:loaded"] and not any(made)      # nothing made before it is asked for
    packet = api.query(saved, QUERY)
    assert packet["items"][0]["id"] == "state.mira.gaming"
    assert 0 < sum(r is not None for r in made) < len(made)
    fresh = load_story(path)
    assert list(saved.records) == fresh.records
    assert saved.model_dump() == fresh.model_dump()
    assert dict(saved.kinds) == fresh.kinds and dict(saved.sizes) == fresh.sizes
    assert saved.holders("topics") == fresh.holders("topics")
    assert indexes.story_key(saved) == indexes.story_key(fresh)


def test_a_changed_story_is_read_again_never_served_stale(project):
    path = project / "fixtures" / "aurora-ridge.yaml"
    first = open_story(path)
    OPENED.clear()
    text = path.read_text(encoding="utf-8")
    stat = path.stat()
    # same size and modification time, other content: a cheap identity would serve the old story
    path.write_text(text.replace("Lately I have not felt like playing games.",
                                 "Lately I have not felt like playing chess."), encoding="utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size
    built = COUNTS["story:built"]
    second = open_story(path)
    assert COUNTS["story:built"] == built + 1
    assert "chess" in second.by_id["state.mira.gaming"].text and "chess" not in first.by_id["state.mira.gaming"].text
    saves = sorted((project / ".garden" / "index").glob("aurora-ridge.story.*.npz"))
    assert len(saves) == 1            # the stale save removed when the new one landed


def test_a_broken_story_is_reported_not_saved(project):
    from garden.errors import StoryError

    path = project / "fixtures" / "aurora-ridge.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("kind: state", "kind: stat", 1), encoding="utf-8")
    with pytest.raises(StoryError, match="kind"):
        open_story(path)
    assert not list((project / ".garden" / "index").glob("aurora-ridge.story.*"))


@pytest.mark.parametrize("how", ["torn", "group-readable", "another owner", "another kind"])
def test_a_damaged_or_foreign_story_save_is_refused_and_made_again(project, capsys, monkeypatch, how):
    path = project / "fixtures" / "aurora-ridge.yaml"
    open_story(path)
    OPENED.clear()
    save = next((project / ".garden" / "index").glob("aurora-ridge.story.*.npz"))
    if how == "torn":
        save.write_bytes(save.read_bytes()[:200])
    elif how == "group-readable":
        os.chmod(save, 0o640)
    elif how == "another owner":
        monkeypatch.setattr(os, "geteuid", lambda: os.stat(save).st_uid + 1)
    else:
        table = next((project / ".garden" / "index").glob("aurora-ridge.table_*.npz"), None)
        if table is None:
            from garden import api

            api.query("aurora-ridge", QUERY)
            table = next((project / ".garden" / "index").glob("aurora-ridge.table_*.npz"))
        save.write_bytes(table.read_bytes())
    OPENED.clear()
    built = COUNTS["story:built"]
    story = open_story(path)
    assert COUNTS["story:built"] == built + 1
    err = capsys.readouterr().err
    assert str(save) in err and ("does not load" in err or "not loaded" in err or "is not a story" in err)
    assert story.by_id["state.mira.gaming"].kind == "state"
    monkeypatch.undo()
    assert os.stat(save).st_mode & 0o077 == 0     # made again, private


def test_an_attachment_changed_after_the_save_is_reported(project):
    """An attachment's bytes live outside the story file: checked again at every read."""
    import hashlib

    from garden.errors import StoryError

    path = project / "fixtures" / "aurora-ridge.yaml"
    (project / "fixtures" / "note.txt").write_text("the map", encoding="utf-8")
    digest = hashlib.sha256(b"the map").hexdigest()
    text = path.read_text(encoding="utf-8")
    marker = "  - id: state.mira.gaming\n"
    assert marker in text
    path.write_text(text.replace(marker, marker + f"    attachments: [{{path: note.txt, sha256: {digest}}}]\n"),
                    encoding="utf-8")
    open_story(path)
    OPENED.clear()
    open_story(path)                                   # from the save
    (project / "fixtures" / "note.txt").write_text("another map", encoding="utf-8")
    OPENED.clear()
    with pytest.raises(StoryError, match="note.txt"):
        open_story(path)
