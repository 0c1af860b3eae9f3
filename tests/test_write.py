"""Writing to a served story, in process: `garden.serve._writes` over `garden.formats.story_writer`,
on real files. What is written is the story format every stage reads; a refused write
changes no byte; writers in several processes lose and interleave nothing; a writer killed
mid-line leaves a story that reads back valid; the walk-through writes exactly the contrast
case's story.
"""
from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import os
import shutil
from pathlib import Path

import pytest

from garden.errors import GardenError
from garden.formats.stories import load_story
from garden.formats.story_writer import Memory, remember as write_memory
from garden.serve._core import Garden, RequestError, Shelf
from garden.serve import _writes
from garden.serve._writes import WriteBounds, WriteRate, Writing, forget, remember
import written_memory

TODAY = dt.date(2031, 12, 4)


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """A store holding the quarry hut's story before any write, and a hand-written YAML one."""
    (tmp_path / "fixtures").mkdir()
    shutil.copy(written_memory.BASE, tmp_path / "fixtures")
    shutil.copy(Path(__file__).resolve().parents[1] / "fixtures" / "kiln-lane.yaml", tmp_path / "fixtures")
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    return tmp_path


def garden_of(folder: Path, **bounds) -> Garden:
    shelf = Shelf.open(None, folder)
    writing = Writing.check(["quarry-hut"], shelf.paths, clock=lambda: TODAY, bounds=WriteBounds(**bounds))
    return Garden(shelf, pipelines={}, writing=writing)


def story_file(folder: Path) -> Path:
    return folder / "fixtures" / "quarry-hut.jsonl"


def test_the_walk_through_writes_the_contrast_cases_story(folder):
    garden = garden_of(folder)
    answered = written_memory.walk(lambda tool, arguments: getattr(_writes, tool)(garden, arguments))
    assert answered == ["decision.000001", "state.000002", "source.000003", "decision.000004", "state.000005",
                        "note.000006", "control.000007"]
    assert written_memory.same_story(story_file(folder))
    story = load_story(story_file(folder))   # valid by every rule of garden check
    old = story.by_id["decision.000001"]
    assert (old.status, old.superseded_by) == ("superseded", "decision.000004")
    assert "note.000006" not in story.by_id
    control = story.by_id["control.000007"]
    assert control.kind == "control" and "note.000006" in control.text and TODAY.isoformat() in control.text
    assert "4471" not in story_file(folder).read_text(encoding="utf-8")   # forgotten: its text is gone
    log = folder / ".garden" / "traces" / f"writes-{TODAY.isoformat()}.jsonl"
    entries = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert [(e["tool"], e["story"], e["id"]) for e in entries][-1] == ("forget", "quarry-hut", "note.000006")
    assert len(entries) == len(written_memory.STEPS) and oct(log.stat().st_mode & 0o777) == "0o600"


def test_a_date_left_out_is_the_servers_today_and_said_so(folder):
    answer = remember(garden_of(folder), {"story": "quarry-hut", "text": "Snow on the quarry road."})
    assert (answer["at"], answer["dated_by"], answer["kind"]) == (TODAY.isoformat(), "server", "source")


REFUSED = [
    ({"story": "kiln-lane", "text": "x"}, 403, "story"),                        # served, not writable
    ({"story": "../../etc/passwd", "text": "x"}, 404, "story"),                  # a path is no story name
    ({"story": "quarry-hut", "text": "x", "topics": ["heat"]}, 422, "topics"),   # an alias, not the canonical id
    ({"story": "quarry-hut", "text": "x", "topics": ["tea"]}, 422, "topics"),
    ({"story": "quarry-hut", "text": "x", "entities": ["mira"]}, 422, "entities"),
    ({"story": "quarry-hut", "text": "x" * 8001}, 422, "text"),
    ({"story": "quarry-hut", "text": "   "}, 422, "text"),
    ({"story": "quarry-hut", "text": "the gate \x1b[31mis red\x00"}, 422, "text"),
    ({"story": "quarry-hut", "text": "x", "kind": "control"}, 422, "kind"),
    ({"story": "quarry-hut", "text": "x", "at": "2031-02-30"}, 422, "at"),
    ({"story": "quarry-hut", "text": "x", "id": "mine.1"}, 422, "id"),          # ids are the server's
    ({"story": "quarry-hut", "text": "x", "topics": ["water"] * 33}, 422, "topics"),
    ({"story": "quarry-hut", "text": "x", "private": "yes"}, 422, "private"),
    ({"story": "quarry-hut", "text": "x", "kind": "state", "supersedes": "../log.0901"}, 422, "supersedes"),
    ({"story": "quarry-hut", "text": "x", "kind": "state", "supersedes": "log.0901"}, 422, "supersedes"),  # a source
    ({"story": "quarry-hut", "text": "x", "kind": "state", "supersedes": "state.404"}, 422, "supersedes"),
    ({"story": "quarry-hut", "text": "x", "kind": "note", "supersedes": "note.rules"}, 422, "supersedes"),
]


@pytest.mark.parametrize(("body", "status", "field"), REFUSED, ids=[f"{f}-{n}" for n, (_, _, f) in enumerate(REFUSED)])
def test_a_refused_write_names_its_field_and_changes_nothing(folder, body, status, field):
    garden = garden_of(folder)
    before = story_file(folder).read_bytes()
    with pytest.raises(RequestError) as refused:
        remember(garden, body)
    assert (refused.value.status, refused.value.field) == (status, field), refused.value.message
    assert "\n" not in refused.value.message and len(refused.value.message) < 400
    assert story_file(folder).read_bytes() == before
    assert garden.refused == 1 and garden.queries == 0


def test_supersession_and_forget_keep_the_story_whole(folder):
    garden = garden_of(folder)
    first = remember(garden, {"story": "quarry-hut", "text": "Ines keeps the hut.", "kind": "state",
                              "at": "2031-10-01"})["id"]
    second = remember(garden, {"story": "quarry-hut", "text": "Oskar keeps the hut.", "kind": "state",
                               "at": "2031-11-01", "supersedes": first})["id"]
    before = story_file(folder).read_bytes()
    for body, field, words in [
            ({"story": "quarry-hut", "text": "x", "kind": "state", "supersedes": first}, "supersedes", "already"),
            ({"story": "quarry-hut", "text": "x", "kind": "state", "at": "2031-10-15", "supersedes": second}, "at",
             "before"),
    ]:
        with pytest.raises(RequestError) as refused:
            remember(garden, body)
        assert refused.value.field == field and words in refused.value.message
    for rid, words in [(second, f"named by record {first} (field superseded_by)"), ("control.9", "names no record"),
                       ("a/b", "path separator")]:
        with pytest.raises(RequestError) as refused:
            forget(garden, {"story": "quarry-hut", "id": rid})
        assert refused.value.field == "id" and words in refused.value.message
    assert story_file(folder).read_bytes() == before
    control = forget(garden, {"story": "quarry-hut", "id": first})["control"]
    with pytest.raises(RequestError, match="control record"):
        forget(garden, {"story": "quarry-hut", "id": control})
    assert set(load_story(story_file(folder)).by_id) >= {second, control}


def test_the_bounds_are_enforced(folder):
    size = story_file(folder).stat().st_size
    full = garden_of(folder, story_bytes=size + 100)
    with pytest.raises(RequestError) as refused:
        remember(full, {"story": "quarry-hut", "text": "y" * 200})
    assert (refused.value.status, refused.value.field) == (507, "story") and f"{size + 100:,}" in refused.value.message
    assert story_file(folder).stat().st_size == size
    short = garden_of(folder, text_chars=10)
    with pytest.raises(RequestError, match="at most 10 characters"):
        remember(short, {"story": "quarry-hut", "text": "eleven char"})
    rate = WriteRate()
    assert [rate.take(2, now=600.0) for _ in range(3)] == [True, True, False]
    assert rate.take(2, now=660.0) is True   # a new minute
    limited = garden_of(folder, writes_a_minute=1)
    limited.writing.rate = WriteRate()
    remember(limited, {"story": "quarry-hut", "text": "one"})
    with pytest.raises(RequestError) as refused:
        remember(limited, {"story": "quarry-hut", "text": "two"})
    assert refused.value.status == 429


def test_only_a_json_lines_story_served_may_be_writable(folder):
    shelf = Shelf.open(None, folder)
    with pytest.raises(GardenError, match="kiln-lane.yaml is not JSON Lines"):
        Writing.check(["kiln-lane"], shelf.paths)
    with pytest.raises(GardenError, match="not a story served here"):
        Writing.check(["tern-quay"], shelf.paths)


def test_the_command_line_refuses_a_story_it_cannot_write(folder, monkeypatch, capsys):
    from garden.cli import main

    monkeypatch.chdir(folder)
    assert main(["serve", "--port", "0", "--writable", "kiln-lane"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--writable kiln-lane" in err[0] and "JSON Lines" in err[0]


def _writer(path: str, worker: int, count: int, answered) -> None:
    """One process writing `count` records, each answered only once written."""
    for n in range(count):
        rid = write_memory(Path(path), lambda: load_story(Path(path)),
                           Memory(text=f"worker {worker} line {n}", at=TODAY, topics=["supplies"]))
        answered.put(rid)


def test_writers_in_several_processes_lose_and_interleave_nothing(folder):
    path = story_file(folder)
    context = multiprocessing.get_context("fork")
    answered = context.Queue()
    workers = [context.Process(target=_writer, args=(str(path), w, 15, answered)) for w in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    ids = [answered.get(timeout=5) for _ in range(60)]
    story = load_story(path)
    written = [r for r in story.records if r.id.startswith("source.")]
    assert len(set(ids)) == 60 and sorted(r.id for r in written) == sorted(ids)
    texts = {r.text for r in written}
    assert texts == {f"worker {w} line {n}" for w in range(4) for n in range(15)}


def test_a_torn_last_line_is_set_aside_and_cut_off_by_the_next_write(folder, capsys):
    path = story_file(folder)
    garden = garden_of(folder)
    kept = remember(garden, {"story": "quarry-hut", "text": "The gate is oiled."})["id"]
    whole = path.read_bytes()
    with open(path, "ab") as fh:   # a writer killed in the middle of its line
        fh.write(b'{"id": "source.000002", "kind": "source", "text": "Half a sen')
    story = load_story(path)
    assert kept in story.by_id and "source.000002" not in story.by_id
    assert "torn last line" in capsys.readouterr().err
    second = remember(garden, {"story": "quarry-hut", "text": "The roof is swept."})["id"]
    assert path.read_bytes().startswith(whole) and path.read_bytes().count(b"Half a sen") == 0
    assert {kept, second} <= set(load_story(path).by_id)


def test_a_whole_last_line_without_its_newline_is_kept(folder):
    path = story_file(folder)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    remember(garden_of(folder), {"story": "quarry-hut", "text": "Fresh chalk in the box."})
    assert {"note.rules", "source.000001"} <= set(load_story(path).by_id)


def test_a_write_refused_by_a_story_that_does_not_build_changes_nothing(folder):
    path = story_file(folder)
    path.write_bytes(path.read_bytes() + b'{"id": "log.0901", "kind": "source", "text": "twice"}\n')
    before = path.read_bytes()
    with pytest.raises(RequestError) as refused:
        remember(garden_of(folder), {"story": "quarry-hut", "text": "x"})
    assert refused.value.field == "story" and "duplicate id" in refused.value.message
    assert path.read_bytes() == before
    assert os.access(path, os.W_OK)


def test_the_contrast_case_holds_under_default_and_no_bare_retriever(monkeypatch, tmp_path, capsys):
    from garden.cli import main

    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    capsys.readouterr()
    assert main(["contrast", str(written_memory.CASES), "--json"]) == 0
    (case,) = json.loads(capsys.readouterr().out)["cases"]
    assert case["case"] == "supersession-through-the-door" and case["contrast"] is True
    assert case["pipelines"]["default"]["passed"] is True
    assert set(case["baselines_failing"]) == {"bm25", "bm25s", "dense", "hybrid", "tfidf"}


def _writing_until(path: str, stop) -> None:
    n = 0
    while not stop.is_set():
        write_memory(Path(path), lambda: load_story(Path(path)),
                     Memory(text=f"Kept writing: line {n}.", at=TODAY, topics=["routes"]))
        n += 1


def test_backup_restore_and_doctor_cover_a_written_story_even_while_it_is_written(folder, monkeypatch, capsys,
                                                                                   tmp_path_factory):
    from garden.cli import main

    garden = garden_of(folder)
    written_memory.walk(lambda tool, arguments: getattr(_writes, tool)(garden, arguments))
    path = story_file(folder)
    with open(path, "ab") as fh:   # and a writer killed mid-line
        fh.write(b'{"id": "source.000099", "kind": "sou')
    monkeypatch.chdir(folder)
    context = multiprocessing.get_context("fork")
    stop = context.Event()
    writer = context.Process(target=_writing_until, args=(str(path), stop))
    writer.start()
    try:
        archive = tmp_path_factory.mktemp("archive") / "store.tar.gz"
        assert main(["backup", "--out", str(archive), "--pipeline", "bm25"]) == 0, capsys.readouterr().err
    finally:
        stop.set()
        writer.join(30)
    into = tmp_path_factory.mktemp("restored") / "store"
    assert main(["restore", str(archive), "--into", str(into)]) == 0, capsys.readouterr().err
    restored = load_story(into / "fixtures" / "quarry-hut.jsonl")   # whole: between two writes, never in one
    assert {"decision.000004", "control.000007"} <= set(restored.by_id) and "note.000006" not in restored.by_id
    capsys.readouterr()
    assert main(["doctor", "--root", str(into)]) == 0, capsys.readouterr().out
    assert main(["doctor", "--root", str(folder)]) == 0, capsys.readouterr().out


def test_the_next_read_takes_only_the_lines_appended_and_holds_what_a_whole_read_holds(folder, monkeypatch):
    import garden.formats.stories as stories
    from garden.derived.saves import story_key

    garden = garden_of(folder)
    path = story_file(folder)
    garden.shelf.get("quarry-hut")
    whole_reads = []
    monkeypatch.setattr(stories, "load_story", lambda p: whole_reads.append(p) or load_story(p))
    for n in range(3):
        remember(garden, {"story": "quarry-hut", "text": f"Cairn {n} rebuilt.", "topics": ["routes"]})
    with open(path, "ab") as fh:   # another writer's record, appended by hand: read as the server's are
        fh.write(b'{"id": "log.1201", "kind": "source", "at": "2031-12-01", "text": "Ice on the east face."}\n')
    held, _ = garden.shelf.get("quarry-hut")
    assert whole_reads == []
    fresh = load_story(path)
    assert [r.id for r in held.records] == [r.id for r in fresh.records] and story_key(held) == story_key(fresh)
    with open(path, "ab") as fh:   # an appended line that breaks a rule is refused as a whole read refuses it
        fh.write(b'{"id": "log.1202", "kind": "source", "at": "2031-12-02", "text": "x", "topics": ["tea"]}\n')
    with pytest.raises(RequestError, match="'tea' is not a canonical topic id"):
        garden.shelf.get("quarry-hut")


def test_a_replaced_version_of_a_served_story_leaves_nothing_built_for_it_in_memory(folder):
    from garden.derived.saves import story_key
    from garden.pipelines.indexes import PROCESS_INDEXES
    from garden.serve._core import served_pipelines

    garden = garden_of(folder)
    garden.served = served_pipelines(["bm25"])
    versions = []
    for n in range(3):
        garden.query({"story": "quarry-hut", "text": "Who carried the lentils up?", "pipeline": "bm25"})
        versions.append(story_key(garden.shelf.get("quarry-hut")[0]))
        remember(garden, {"story": "quarry-hut", "text": f"Lentils carried up, trip {n}."})
    garden.query({"story": "quarry-hut", "text": "Who carried the lentils up?", "pipeline": "bm25"})
    current = story_key(garden.shelf.get("quarry-hut")[0])
    held = {key[1] for key in PROCESS_INDEXES._entries._entries}
    assert current in held and not held & set(versions)
