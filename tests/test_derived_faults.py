"""Derived data that heals, and every write kept inside the garden home.

Each test reproduces a fault a user met: a damaged saved index, orphaned temporary
files, a torn trace line, a link where the garden writes, a story name that escapes
fixtures/, a retention window out of range. Faults in derived data heal (exit 0, one
warning); bad input is one line on stderr and exit 2, with nothing written outside.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import garden.evaluation.runner
import garden.pipelines.traces as traces_mod
from garden.cli import main
from garden.errors import GardenError
from garden.models import Hints
from garden.rerank.stages import Settings
from garden.derived.home import (MAX_RETENTION_DAYS, ORPHAN_MAX_AGE, ORPHAN_MIN_AGE, check_environment, remove_orphans)
from garden.rerank.phrase import TESTED_LISTED, PhraseIndex, phrase_credit, shingles
from garden.analyzer import word_runs
from garden.evaluation.runner import record_trace
from garden.rerank.query import QuerySpec
from garden.formats.stories import latest_date, load_story
from garden.pipelines.structured import StructuredPipeline
from garden.pipelines.traces import read_trace, read_trace_lines, trace_file, write_trace

TODAY = dt.date.today()


class _CollectionDay(dt.date):
    """Today is the day the module was collected, whatever the clock says by the time a test
    runs: a run that crosses midnight writes its traces where its tests look for them."""

    @classmethod
    def today(cls):
        return TODAY


@pytest.fixture(autouse=True)
def _one_day(monkeypatch):
    clock = SimpleNamespace(date=_CollectionDay, timedelta=dt.timedelta, datetime=dt.datetime)
    monkeypatch.setattr(traces_mod, "dt", clock)
    monkeypatch.setattr(garden.evaluation.runner, "dt", clock)
QUERY = ["query", "aurora-ridge", "Why have I not felt like gaming recently?", "--pipeline", "bm25"]
DEAD_PID = 99999999  # above any kernel's pid_max: no process has it


@pytest.fixture(autouse=True)
def fresh_process_state(monkeypatch):
    """Each test starts as a new process would: environment not yet checked, traces on."""
    garden.evaluation.runner.PRUNE_TRACES.reset()
    for name in ("GARDEN_TRACE", "GARDEN_TRACE_DAYS"):
        monkeypatch.delenv(name, raising=False)


def run_cli(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    """The single bounded line a bad input prints."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("garden: ") and len(lines[0]) < 400, lines[0]
    assert "Traceback" not in err
    return lines[0]


def warnings_in(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("garden: warning: ")]


def age(path: Path, seconds: float) -> Path:
    then = time.time() - seconds
    os.utime(path, (then, then))
    return path


# --- 1. a damaged embedding cache costs re-encoding, nothing more: tests/test_embedding_cache.py


# --- 2. orphaned temporary files are removed, a live writer's never -------------------------


def temp(path: Path, seconds: float) -> Path:
    """A temporary file as a writer left it, last touched `seconds` ago."""
    path.write_text("{")
    return age(path, seconds)


def test_orphaned_index_temp_files_are_removed_on_the_next_build(project, capsys):
    index = project / ".garden" / "index"
    index.mkdir(parents=True)
    pid, old = os.getpid(), ORPHAN_MIN_AGE + 60
    temp(index / f".aurora-ridge.pid{DEAD_PID}.abc123de.tmp", old)      # its writer is gone
    temp(index / ".aurora-ridge.x1y2z3w4.tmp", old)                      # a name without a pid
    temp(index / f".aurora-ridge.pid{pid}.q1w2e3r4.tmp", ORPHAN_MAX_AGE + 60)  # past any writer's life
    kept = {temp(index / f".other.pid{DEAD_PID}.zz9zz9zz.tmp", 0).name,  # young: maybe another machine's
            temp(index / f".other.pid{pid}.aa1aa1aa.tmp", old).name,     # its writer is still running
            temp(index / "notes.txt", ORPHAN_MAX_AGE + 60).name}         # not a temporary file
    code, out, _ = run_cli(["check", "aurora-ridge"], capsys)
    assert code == 0 and out.startswith("ok ")
    assert {p.name for p in index.iterdir()} == kept | {"aurora-ridge.json"}


def test_the_orphan_rule_never_takes_a_link_or_a_folder(tmp_path):
    outside = tmp_path / "outside.part"
    outside.write_text("keep")
    folder = tmp_path / "f"
    folder.mkdir()
    link = folder / f".shard.pid{DEAD_PID}.aaaaaaaa.part"
    link.symlink_to(outside)
    (folder / f".shard.pid{DEAD_PID}.bbbbbbbb.part").mkdir()
    assert remove_orphans(folder, ".part", now=time.time() + ORPHAN_MAX_AGE * 2) == []
    assert link.is_symlink() and outside.read_text() == "keep"


# --- 3. traces: a torn line is sealed and skipped, never glued, never fatal ---------------


def test_a_torn_trace_line_is_sealed_then_skipped_by_compare(project, capsys):
    assert run_cli(QUERY, capsys)[0] == 0
    path = trace_file(TODAY)
    whole = path.read_bytes()
    # a writer killed mid-line: half an event, cut inside a two-byte character, no newline
    torn = json.dumps({"version": 1, "query": "café " * 50}, ensure_ascii=False).encode()
    cut = torn.index("é".encode()) + 1
    path.write_bytes(whole + torn[:cut])
    assert run_cli(QUERY, capsys)[0] == 0
    lines = path.read_bytes().split(b"\n")
    assert lines[1] == torn[:cut]                                # sealed where it stopped
    assert json.loads(lines[2])["query"] == QUERY[2]             # the next event stands alone
    code, out, err = run_cli(["compare", str(path), "--pipelines", "bm25", "--json"], capsys)
    assert code == 0
    trace = json.loads(out)["trace"]  # both whole events read; the same question asked twice, folded
    assert (trace["events"], trace["distinct"], trace["folded"]) == (2, 1, 1)
    [warned] = warnings_in(err)
    assert f"{path}:2:" in warned and "line skipped" in warned
    assert [n for n, _ in read_trace_lines(path)] == [1, 3]


def test_every_bad_line_is_skipped_with_one_warning_and_strict_still_stops(tmp_path, project, capsys):
    assert run_cli(QUERY, capsys)[0] == 0
    good = trace_file(TODAY).read_text(encoding="utf-8").strip()
    other = json.loads(good)
    other["version"] = 2
    bad_field = json.loads(good)
    bad_field["as_of"] = "2030-02-30"
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([good, "{oops", json.dumps(other), "[1]", json.dumps(bad_field), good]) + "\n")
    events = read_trace(path)
    warned = warnings_in(capsys.readouterr().err)
    assert len(events) == 2
    assert [w.split(f"{path}:")[1].split(":")[0] for w in warned] == ["2", "3", "4", "5"]
    with pytest.raises(GardenError, match=r"t\.jsonl:2: not a JSON line"):
        read_trace(path, strict=True)


def test_each_event_is_one_append_write_that_never_follows_a_link(tmp_path, monkeypatch, project, capsys):
    assert run_cli(QUERY, capsys)[0] == 0
    [event] = read_trace(trace_file(TODAY))
    calls: dict[str, list] = {"open": [], "write": []}
    real_open, real_write = os.open, os.write

    def spy_open(path, flags, *rest):
        calls["open"].append(flags)
        return real_open(path, flags, *rest)

    def spy_write(fd, data):
        calls["write"].append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(traces_mod.os, "open", spy_open)
    monkeypatch.setattr(traces_mod.os, "write", spy_write)
    write_trace(event)
    [flags] = calls["open"]
    assert flags & os.O_APPEND and flags & os.O_NOFOLLOW
    [data] = calls["write"]
    assert data.endswith(b"\n") and data.count(b"\n") == 1 and json.loads(data)["query"] == event.query


def test_a_long_query_keeps_its_trace_line_bounded(project):
    words = [f"w{i}x" for i in range(3000)]                      # no record holds any of these
    text = "gaming console " + " ".join(words)
    story = load_story(project / "fixtures" / "aurora-ridge.yaml")
    spec = QuerySpec(story, text, latest_date(story), 1200, Hints(), False, Settings(), [],
                     str(project / "fixtures" / "aurora-ridge.yaml"))
    outcome = StructuredPipeline("default", "bm25").run(spec)
    phrase = outcome.stages["phrase"]
    total = len(shingles(word_runs(text)))
    assert phrase["tested_total"] == total > 10 * TESTED_LISTED
    assert len(phrase["tested"]) == TESTED_LISTED + sum(
        1 for t in phrase["tested"][TESTED_LISTED:] if t["credited"])
    assert phrase["omitted"] == total - len(phrase["tested"])
    record_trace(spec, "default", outcome, None)
    line = trace_file(TODAY).read_bytes()
    assert len(line) < len(text.encode()) + 200_000             # the spans no longer swamp the line


def test_every_credited_span_is_listed_even_past_the_bound():
    filler = " ".join(f"f{i}q" for i in range(100))
    query = f"{filler} glacier custard incident"
    credit = phrase_credit(PhraseIndex({"r1": "the glacier custard incident"}), query, {"r1": "note"})
    credited = [t["span"] for t in credit.tested if t["credited"]]
    assert set(credited) == {"glacier custard", "custard incident", "glacier custard incident"}
    assert credit.credited_total == 3 and credit.omitted == credit.tested_total - len(credit.tested) > 0
    assert credit.bonus == {"r1": 1.0}                           # the bound changes the record, not the score


# --- 4. containment: never write through a link, never a traceback for a bad home ----------


def link_refused(err: str, path: Path) -> None:
    line = one_line(err)
    assert str(path) in line and "is a symbolic link; the garden does not write through links" in line


@pytest.mark.parametrize("dangling", [False, True])
def test_a_trace_file_that_is_a_link_is_refused(project, tmp_path, capsys, dangling):
    precious = tmp_path / "precious.txt"
    if not dangling:
        precious.write_text("mine\n")
    traces = project / ".garden" / "traces"
    traces.mkdir(parents=True)
    link = traces / f"trace-{TODAY.isoformat()}.jsonl"
    link.symlink_to(precious)
    code, out, err = run_cli(QUERY, capsys)
    assert code == 2 and out == ""
    link_refused(err, link)
    assert link.is_symlink()
    if dangling:
        assert not precious.exists()                            # not created through the link either
    else:
        assert precious.read_text() == "mine\n"


@pytest.mark.parametrize("folder, args", [
    ("traces", QUERY),
    ("index", ["check", "aurora-ridge"]),
])
def test_a_derived_folder_that_is_a_link_is_refused(project, tmp_path, capsys, folder, args):
    outside = tmp_path / "outside"
    outside.mkdir()
    home = project / ".garden"
    home.mkdir()
    (home / folder).symlink_to(outside, target_is_directory=True)
    code, out, err = run_cli(args, capsys)
    assert code == 2
    link_refused(err, home / folder)
    assert list(outside.iterdir()) == []


def test_an_index_file_that_is_a_link_is_refused(project, tmp_path, capsys):
    precious = tmp_path / "precious.json"
    precious.write_text("{}")
    index = project / ".garden" / "index"
    index.mkdir(parents=True)
    (index / "aurora-ridge.json").symlink_to(precious)
    code, _, err = run_cli(["check", "aurora-ridge"], capsys)
    assert code == 2
    link_refused(err, index / "aurora-ridge.json")
    assert precious.read_text() == "{}"
    assert [p.name for p in index.iterdir()] == ["aurora-ridge.json"]   # no temp file left either


def test_a_garden_home_that_is_a_link_is_followed(project, tmp_path, capsys, monkeypatch):
    real = tmp_path / "real-home"
    real.mkdir()
    (tmp_path / "home-link").symlink_to(real, target_is_directory=True)
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / "home-link"))
    assert run_cli(QUERY, capsys)[0] == 0
    assert (real / "traces" / f"trace-{TODAY.isoformat()}.jsonl").is_file()


@pytest.mark.parametrize("args", [QUERY, ["check", "aurora-ridge"], ["traces"]])
def test_a_garden_home_that_is_a_file_is_one_line(project, tmp_path, capsys, monkeypatch, args):
    home = tmp_path / "home-file"
    home.write_text("not a folder")
    monkeypatch.setenv("GARDEN_HOME", str(home))
    code, out, err = run_cli(args, capsys)
    assert code == 2
    line = one_line(err)
    assert f"GARDEN_HOME={home}" in line and "not a folder" in line
    assert home.read_text() == "not a folder"


@pytest.mark.parametrize("folder, args", [("index", ["check", "aurora-ridge"]), ("traces", QUERY),
                                          ("traces", ["traces"])])
def test_a_derived_folder_that_is_a_file_is_one_line(project, capsys, folder, args):
    home = project / ".garden"
    home.mkdir()
    (home / folder).write_text("a file")
    code, _, err = run_cli(args, capsys)
    assert code == 2
    line = one_line(err)
    assert str(home / folder) in line and "is not a folder" in line
    assert (home / folder).read_text() == "a file"


# --- 5. a story name stays inside fixtures/ ---------------------------------------------------


def escaping_story(project: Path) -> Path:
    """A valid story outside fixtures/, where `../../x` from a case in regression/ would land."""
    text = (project / "fixtures" / "aurora-ridge.yaml").read_text(encoding="utf-8")
    target = project / "x.yaml"
    target.write_text(text.replace("story: aurora-ridge", "story: x", 1), encoding="utf-8")
    return target


@pytest.mark.parametrize("name", ["../../etc/passwd", "../x", "/etc/passwd", ".hidden", "Aurora-Ridge",
                                  "fixtures/aurora-ridge", ".."])
def test_a_story_name_that_escapes_fixtures_is_refused(project, capsys, name):
    escaping_story(project)
    code, out, err = run_cli(["query", name, "gaming", "--pipeline", "bm25"], capsys)
    assert code == 2 and out == ""
    line = one_line(err)
    assert "not a story name" in line and repr(name) in line
    assert not (project / ".garden" / "traces").exists()


def test_a_case_naming_a_story_outside_fixtures_is_refused(project, capsys):
    escaping_story(project)
    case = project / "regression" / "escape.yaml"
    original = (project / "regression" / "budget.yaml").read_text(encoding="utf-8")
    case.write_text(original.replace("story: aurora-ridge", "story: ../x", 1)
                    .replace("id: budget", "id: escape", 1), encoding="utf-8")
    code, _, err = run_cli(["run", str(case), "--pipeline", "bm25"], capsys)
    assert code == 2
    line = one_line(err)
    assert str(case) in line and "'../x'" in line and "not a story name" in line


def test_a_story_path_ending_in_yaml_is_still_a_path(project, capsys):
    moved = project / "elsewhere"
    moved.mkdir()
    shutil.copy(project / "fixtures" / "aurora-ridge.yaml", moved / "aurora-ridge.yaml")
    code, out, _ = run_cli(["query", "elsewhere/aurora-ridge.yaml", "gaming", "--pipeline", "bm25", "--json"],
                           capsys)
    assert code == 0 and json.loads(out)["decision"]


# --- 6. retention stays inside its range and never deletes today ------------------------------


def trace_files(project: Path, *days: dt.date) -> dict[dt.date, Path]:
    folder = project / ".garden" / "traces"
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for day in days:
        out[day] = folder / f"trace-{day.isoformat()}.jsonl"
        out[day].write_text("{}\n")
    return out


@pytest.mark.parametrize("value", ["-1", "-100000", "99999999", "36501", "²", "14.5", "1e3"])
def test_an_out_of_range_keep_days_is_refused(project, capsys, value):
    files = trace_files(project, TODAY, TODAY + dt.timedelta(days=3), TODAY - dt.timedelta(days=400))
    code, out, err = run_cli(["traces", f"--keep-days={value}"], capsys)
    assert code == 2 and out == ""
    line = one_line(err)
    assert "--keep-days" in line and f"from 0 to {MAX_RETENTION_DAYS}" in line and repr(value) in line
    assert all(p.exists() for p in files.values())


def test_a_window_before_the_calendar_begins_deletes_nothing(project, capsys):
    first = dt.date(1, 1, 1)
    files = trace_files(project, first, dt.date(1, 1, 20), dt.date(30, 6, 1))
    code, out, _ = run_cli(["traces", "--today", "0001-01-01"], capsys)
    assert code == 0 and out.strip().endswith(f"removed from {project / '.garden' / 'traces'}")
    code, _, _ = run_cli(["traces", "--today", "0050-01-01", "--keep-days", str(MAX_RETENTION_DAYS)], capsys)
    assert code == 0
    assert all(p.exists() for p in files.values())


def test_a_zero_window_keeps_today_and_later(project, capsys):
    yesterday, tomorrow = TODAY - dt.timedelta(days=1), TODAY + dt.timedelta(days=1)
    files = trace_files(project, yesterday, TODAY, tomorrow)
    code, out, _ = run_cli(["traces", "--keep-days", "0"], capsys)
    assert code == 0 and out.startswith(f"removed {files[yesterday]}\n")
    assert not files[yesterday].exists() and files[TODAY].exists() and files[tomorrow].exists()


def test_traces_without_keep_days_uses_garden_trace_days(project, capsys, monkeypatch):
    files = trace_files(project, TODAY - dt.timedelta(days=3), TODAY - dt.timedelta(days=1))
    monkeypatch.setenv("GARDEN_TRACE_DAYS", "2")
    code, out, _ = run_cli(["traces"], capsys)
    assert code == 0 and "older than 2 days" in out
    assert [p.exists() for p in files.values()] == [False, True]


@pytest.mark.parametrize("value", ["99999999", "²", "-3", "two weeks", "1٤"])
def test_a_bad_garden_trace_days_stops_a_query_before_any_output(project, capsys, monkeypatch, value):
    monkeypatch.setenv("GARDEN_TRACE_DAYS", value)
    code, out, err = run_cli(QUERY, capsys)
    assert code == 2 and out == ""
    line = one_line(err)
    assert "GARDEN_TRACE_DAYS" in line and repr(value) in line and f"0 to {MAX_RETENTION_DAYS}" in line
    assert not (project / ".garden" / "traces").exists()
    code, _, err = run_cli(["traces"], capsys)
    assert code == 2 and "GARDEN_TRACE_DAYS" in one_line(err)


def test_check_environment_lists_every_problem_and_writes_nothing(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "index").write_text("x")
    (home / "traces").symlink_to(tmp_path, target_is_directory=True)
    monkeypatch.setenv("GARDEN_HOME", str(home))
    monkeypatch.setenv("GARDEN_TRACE_DAYS", "²")
    monkeypatch.setenv("GARDEN_TRACE", "yes")
    with pytest.raises(GardenError) as info:
        check_environment()
    messages = info.value.messages
    assert len(messages) == 4 and info.value.status == 2
    assert any("GARDEN_TRACE_DAYS" in m and "'²'" in m for m in messages)
    assert any(m.startswith("GARDEN_TRACE must be 0") and "'yes'" in m for m in messages)
    assert any(str(home / "index") in m and "not a folder" in m for m in messages)
    assert any(str(home / "traces") in m and "symbolic link" in m for m in messages)
    assert sorted(p.name for p in home.iterdir()) == ["index", "traces"]


def test_check_environment_accepts_a_fresh_home_without_creating_it(tmp_path, monkeypatch):
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / "not-yet"))
    monkeypatch.setenv("GARDEN_TRACE_DAYS", "30")
    monkeypatch.setenv("GARDEN_TRACE", "0")
    check_environment()
    assert not (tmp_path / "not-yet").exists()
