"""Traces: the JSON-lines round trip, located read errors, and careful retention."""
from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from garden.errors import GardenError
from garden.models import Budget, Hints, Packet, PacketItem, Rejection
from garden.rerank.stages import Settings
from garden.pipelines.traces import TraceEvent
from garden.pipelines.traces import (DEFAULT_RETENTION_DAYS, prune_traces, read_trace, trace_day, trace_dir, trace_file,
                           write_trace)

D = dt.date
TODAY = D(2030, 1, 20)


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    monkeypatch.setenv("GARDEN_HOME", str(h))
    monkeypatch.delenv("GARDEN_TRACE", raising=False)
    return h


def event(query: str = "why paper?") -> TraceEvent:
    packet = Packet(
        decision="retrieve", reason="anchored query", warnings=["w"],
        items=[PacketItem(id="decision.tablet", kind="decision", fidelity="projection",
                          labels=["structured_context"], score=1.25, why=["topic"], text="tablet")],
        rejected=[Rejection(id="pref.milk", reason="off_topic", detail="food")],
        budget=Budget(limit=1200, used=6))
    return TraceEvent(story="tiny", story_path="/x/fixtures/tiny.yaml", query=query, as_of=D(2030, 1, 12),
                      hints=Hints(topics=["gaming"]), budget=1200, settings=Settings(standout=1.4),
                      session=["earlier"], pipeline="default", case="changed-choice",
                      stages={"triage": {"decision": "retrieve"}}, timings_ms={"pack": 0.5}, packet=packet)


# --- write and read ----------------------------------------------------------------------


def test_write_then_read_round_trips(home):
    first, second = event("first"), event("second")
    path = write_trace(first, day=D(2030, 1, 12))
    assert write_trace(second, day=D(2030, 1, 12)) == path
    assert path == home / "traces" / "trace-2030-01-12.jsonl"
    assert path == trace_file(D(2030, 1, 12)) and path.parent == trace_dir()
    assert len(path.read_text(encoding="utf-8").splitlines()) == 2
    assert read_trace(path) == [first, second]


def test_the_day_names_the_file_not_the_as_of(home):
    path = write_trace(event(), day=D(2031, 5, 6))
    assert path.name == "trace-2031-05-06.jsonl"
    assert read_trace(path)[0].as_of == D(2030, 1, 12)


def test_tracing_can_be_switched_off(home, monkeypatch):
    monkeypatch.setenv("GARDEN_TRACE", "0")
    assert write_trace(event(), day=D(2030, 1, 12)) == Path(os.devnull)
    assert not (home / "traces").exists()


def test_blank_lines_are_skipped(home, tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("\n" + event().model_dump_json() + "\n\n", encoding="utf-8")
    assert [e.query for e in read_trace(path)] == ["why paper?"]


def write_lines(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_line_from_another_version_names_file_and_line(tmp_path):
    other = json.loads(event().model_dump_json())
    other["version"] = 2
    path = write_lines(tmp_path / "t.jsonl", event().model_dump_json(), json.dumps(other))
    with pytest.raises(GardenError) as info:
        read_trace(path, strict=True)
    msg = str(info.value)
    assert msg.startswith(f"{path}:2: trace version 2 is not 1")
    assert "another version" in msg


def test_a_line_without_a_version_is_another_version(tmp_path):
    data = json.loads(event().model_dump_json())
    del data["version"]
    path = write_lines(tmp_path / "t.jsonl", json.dumps(data))
    with pytest.raises(GardenError, match=r":1: trace version None is not 1"):
        read_trace(path, strict=True)


def test_a_line_that_is_not_json_names_file_and_line(tmp_path):
    path = write_lines(tmp_path / "t.jsonl", event().model_dump_json(), event().model_dump_json(), "{oops")
    with pytest.raises(GardenError) as info:
        read_trace(path, strict=True)
    assert str(info.value).startswith(f"{path}:3: not a JSON line")


def test_a_json_line_that_is_not_an_object(tmp_path):
    path = write_lines(tmp_path / "t.jsonl", "[1, 2]")
    with pytest.raises(GardenError, match=r"t\.jsonl:1: trace version None"):
        read_trace(path, strict=True)


def test_a_line_with_a_bad_field_names_file_line_and_field(tmp_path):
    data = json.loads(event().model_dump_json())
    data["as_of"] = "2030-02-30"
    path = write_lines(tmp_path / "t.jsonl", json.dumps(data))
    with pytest.raises(GardenError) as info:
        read_trace(path, strict=True)
    assert str(info.value).startswith(f"{path}:1: field as_of:")


def test_a_missing_trace_file(tmp_path):
    with pytest.raises(GardenError) as info:
        read_trace(tmp_path / "absent.jsonl")
    assert str(tmp_path / "absent.jsonl") in str(info.value) and "no such trace file" in str(info.value)


# --- names --------------------------------------------------------------------------------


def test_trace_day_reads_only_exact_names():
    assert trace_day("trace-2030-01-05.jsonl") == D(2030, 1, 5)
    for name in ("trace-2030-02-30.jsonl", "trace-2030-13-01.jsonl", "trace-0000-01-01.jsonl",
                 "trace-2030-1-05.jsonl", "trace-2030-01-05.json", "trace-2030-01-05.jsonl.bak",
                 "xtrace-2030-01-05.jsonl", "Trace-2030-01-05.jsonl", "trace-2030-01-05.jsonl\n",
                 "trace-２０３０-01-05.jsonl", "notes.txt"):
        assert trace_day(name) is None, name


# --- retention ----------------------------------------------------------------------------


def touch(folder: Path, name: str, text: str = "{}\n") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def folder(tmp_path) -> Path:
    f = tmp_path / "traces"
    f.mkdir()
    return f


def names(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def test_prune_deletes_only_traces_older_than_the_window(folder):
    assert DEFAULT_RETENTION_DAYS == 14
    old = touch(folder, "trace-2030-01-05.jsonl")            # 15 days before TODAY
    edge = touch(folder, "trace-2030-01-06.jsonl")           # exactly 14 days: kept
    recent = touch(folder, "trace-2030-01-19.jsonl")
    future = touch(folder, "trace-2030-02-01.jsonl")
    removed = prune_traces(TODAY, folder=folder)
    assert removed == [old]
    assert not old.exists()
    assert edge.exists() and recent.exists() and future.exists()


def test_prune_with_a_shorter_window(folder):
    for day in (10, 17, 18, 19):
        touch(folder, f"trace-2030-01-{day:02d}.jsonl")
    removed = prune_traces(TODAY, keep_days=2, folder=folder)
    assert [p.name for p in removed] == ["trace-2030-01-10.jsonl", "trace-2030-01-17.jsonl"]
    assert names(folder) == {"trace-2030-01-18.jsonl", "trace-2030-01-19.jsonl"}


def test_prune_uses_the_default_trace_folder(home):
    write_trace(event(), day=D(2029, 1, 1))
    kept = write_trace(event(), day=D(2030, 1, 19))
    removed = prune_traces(TODAY)
    assert [p.name for p in removed] == ["trace-2029-01-01.jsonl"]
    assert {p.name for p in trace_dir().iterdir()} == {kept.name}


def test_prune_takes_the_age_from_the_name_not_the_file_times(folder):
    named_recent = touch(folder, "trace-2030-01-19.jsonl")
    named_old = touch(folder, "trace-2029-12-01.jsonl")
    os.utime(named_recent, (0, 0))                               # ancient file times
    far = dt.datetime(2100, 1, 1).timestamp()
    os.utime(named_old, (far, far))                              # file times in the future
    assert prune_traces(TODAY, folder=folder) == [named_old]
    assert named_recent.exists()


def test_prune_skips_impossible_dates(folder):
    for name in ("trace-2030-02-30.jsonl", "trace-2029-13-01.jsonl", "trace-2029-00-10.jsonl",
                 "trace-0000-01-01.jsonl"):
        touch(folder, name)
    assert prune_traces(D(2031, 1, 1), folder=folder) == []
    assert len(names(folder)) == 4


def test_prune_leaves_other_files_alone(folder):
    others = ["trace-2020-01-01.jsonl.bak", "trace-2020-01-01.json", "Trace-2020-01-01.jsonl",
              "trace-2020-1-1.jsonl", "xtrace-2020-01-01.jsonl", "trace-2020-01-01.jsonl~",
              "notes.txt", ".trace-2020-01-01.jsonl", "trace-2020-01-01.jsonl\n", "trace-２０２０-01-01.jsonl"]
    for name in others:
        touch(folder, name)
    (folder / "trace-2020-01-02.jsonl").mkdir()                  # a folder named like a trace
    (folder / "trace-2020-01-02.jsonl" / "inner.txt").write_text("x", encoding="utf-8")
    old = touch(folder, "trace-2020-01-03.jsonl")
    assert prune_traces(TODAY, folder=folder) == [old]
    assert names(folder) == set(others) | {"trace-2020-01-02.jsonl"}
    assert (folder / "trace-2020-01-02.jsonl" / "inner.txt").exists()


def test_prune_never_follows_or_removes_a_symlink_named_like_an_old_trace(folder, tmp_path):
    outside = tmp_path / "precious"
    outside.mkdir()
    target = touch(outside, "trace-2020-01-01.jsonl", "keep me\n")
    link = folder / "trace-2020-01-01.jsonl"
    link.symlink_to(target)
    dangling = folder / "trace-2020-01-02.jsonl"
    dangling.symlink_to(outside / "gone.jsonl")
    dir_link = folder / "trace-2020-01-03.jsonl"
    dir_link.symlink_to(outside, target_is_directory=True)
    assert prune_traces(TODAY, folder=folder) == []
    assert link.is_symlink() and dangling.is_symlink() and dir_link.is_symlink()
    assert target.read_text(encoding="utf-8") == "keep me\n"


def test_prune_never_enters_a_symlinked_folder(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    old = touch(real, "trace-2020-01-01.jsonl")
    link = tmp_path / "linked"
    link.symlink_to(real, target_is_directory=True)
    assert prune_traces(TODAY, folder=link) == []
    assert old.exists()


def test_prune_never_enters_a_symlinked_default_folder(home, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    old = touch(real, "trace-2020-01-01.jsonl")
    home.mkdir()
    (home / "traces").symlink_to(real, target_is_directory=True)
    assert prune_traces(TODAY) == []
    assert old.exists()


def test_prune_of_a_missing_folder_is_a_no_op(tmp_path):
    assert prune_traces(TODAY, folder=tmp_path / "nothing") == []


def _write_many(home: str, count: int, width: int) -> None:
    os.environ["GARDEN_HOME"] = home
    big = {"candidates": [{"id": f"r{i}", "scores": {"bm25": i / 7}} for i in range(width)]}
    for n in range(count):
        write_trace(event(f"q{n}").model_copy(update={"stages": big}), dt.date(2030, 1, 12))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="a server's workers are forked processes")
def test_two_processes_writing_large_lines_at_once_leave_every_line_whole(home):
    import multiprocessing

    # lines of ~100 KB: a write that long is not one page, so a writer that read the file's
    # size mid-write of another would once seal a whole line as torn (an empty line)
    context = multiprocessing.get_context("fork")
    procs = [context.Process(target=_write_many, args=(os.environ["GARDEN_HOME"], 40, 3000)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    lines = trace_file(dt.date(2030, 1, 12)).read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert [len(json.loads(line)["stages"]["candidates"]) for line in lines[:-1]] == [3000] * 120


def test_an_event_built_unchecked_is_still_refused_a_number_that_is_not_finite(home):
    from pydantic import ValidationError

    good = event("NaN bread and Infinity pools")   # the letters in text are no number
    assert write_trace(good, dt.date(2030, 1, 12)).read_text(encoding="utf-8").count("\n") == 1
    for bad in (float("nan"), float("inf")):
        fields = {**dict(good), "stages": {"candidates": [{"id": "a", "scores": {"bm25": bad}}]}}
        with pytest.raises(ValidationError, match="must be finite"):
            write_trace(TraceEvent.model_construct(**fields), dt.date(2030, 1, 12))
    lines = trace_file(dt.date(2030, 1, 12)).read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["query"] == "NaN bread and Infinity pools"
