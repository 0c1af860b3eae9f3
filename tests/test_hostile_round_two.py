"""Hostile input, round two: what each class below did before it was fixed, and what it
does now. A traceback became one located line; terminal escape sequences in a trace are
shown, never obeyed; a repeated option cannot make output grow without bound."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from garden.cli import main
from garden.errors import GardenError
from garden.formats.stories import load_story
from garden.models import lone_surrogate
from garden.formats.cases import Case
from garden.rerank.query import QuerySpec

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "conv-26.json"
ESCAPES = "\x1b[2J\x1b[H\x1b]0;owned\x07"      # clear the screen, home the cursor, retitle the window


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_a_query_with_a_byte_that_is_not_utf8_is_one_line(project, capsys):
    # a shell hands Python the byte 0xff as the lone surrogate U+DCFF; the tokenizer raised on it
    assert main(["query", "aurora-ridge", "spare batteries \udcff warm"]) == 2
    line = _one_error_line(capsys)
    assert line.startswith("garden: query: holds \\udcff") and "not UTF-8" in line


def test_the_api_refuses_it_too(project):
    story = load_story(project / "fixtures" / "aurora-ridge.yaml")
    import datetime as dt

    with pytest.raises(GardenError, match=r"query: holds \\ud800"):
        QuerySpec(story, "why \ud800", dt.date(2030, 1, 12))


def test_a_surrogate_escape_in_a_story_is_a_located_problem(tmp_path, capsys):
    path = tmp_path / "sur.jsonl"
    path.write_text(json.dumps({"story": "sur", "project": "p"}) + "\n"
                    + '{"id": "a", "kind": "source", "text": "hi \\ud800 there"}\n', encoding="utf-8")
    with pytest.raises(GardenError) as err:
        load_story(path)
    [message] = err.value.messages
    assert message.startswith(f"{path}: record a: field text: holds \\ud800")
    assert main(["check", str(path)]) == 1
    assert "record a: field text: holds \\ud800" in capsys.readouterr().out


def test_a_surrogate_escape_in_a_case_query_is_refused():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="query"):
        Case.model_validate({"id": "c", "story": "aurora-ridge", "as_of": "2030-01-12", "query": "why \udfff",
                             "expect": {}})


def test_lone_surrogate_finds_the_first_in_strings_lists_and_dicts():
    assert lone_surrogate("fine") is None and lone_surrogate(["a", "b"]) is None and lone_surrogate(3) is None
    assert lone_surrogate("a\ud83db") == "\\ud83d"
    assert lone_surrogate("a\U0001f600b") is None                     # a whole pair is a character
    assert lone_surrogate(["ok", "x\udc80"]) == "\\udc80" and lone_surrogate({"k\ud800": 1}) == "\\ud800"


@pytest.mark.skipif(not LOCOMO.exists(), reason="the LoCoMo conversations are not beside the project")
def test_the_locomo_import_refuses_a_surrogate_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    data["session_1"][0]["text"] = "Hey \ud800 there"
    path = tmp_path / "conv-bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["import", "locomo", str(path), "--out", str(tmp_path / "out")]) == 2
    line = _one_error_line(capsys)
    assert "conv-bad.json" in line and "text: holds \\ud800" in line
    assert not (tmp_path / "out").exists()


def test_judge_shows_escape_sequences_in_a_traced_query_instead_of_obeying_them(project, capsys):
    # `garden query` refuses control characters, but a trace is a file anyone may write
    assert main(["query", "aurora-ridge", "How do we keep spare batteries warm?"]) == 0
    capsys.readouterr()
    [trace] = sorted((project / ".garden" / "traces").glob("trace-*.jsonl"))
    event = json.loads(trace.read_text(encoding="utf-8").splitlines()[0])
    event["query"] = ESCAPES + event["query"]
    trace.write_text(json.dumps(event) + "\n", encoding="utf-8")
    answers = project / "answers.txt"
    answers.write_text(".\n", encoding="utf-8")                    # skip: just show the question
    assert main(["judge", str(trace), "--answers", str(answers), "--pipelines", "default"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J\\x1b[H\\x1b]0;owned\\x07How do we keep spare batteries warm?" in out


def test_ten_thousand_unknown_hints_print_a_bounded_warning(project, capsys):
    hints = [a for n in range(10_000) for a in ("--hint", f"topic=nosuch{n}")]
    assert main(["query", "aurora-ridge", "How do we keep spare batteries warm?", *hints]) == 0
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert text.count("is not a canonical topic id") == 5
    assert "9995 more unknown topic hints ignored" in text
    assert len(text) < 20_000


@pytest.fixture
def judged(project, capsys):
    """A trace of one question with its verdict, ready to capture."""
    assert main(["query", "aurora-ridge", "How do we keep spare batteries warm?"]) == 0
    [trace] = sorted((project / ".garden" / "traces").glob("trace-*.jsonl"))
    answers = project / "answers.txt"
    answers.write_text("a\nn\nnote.battery=l\n", encoding="utf-8")   # verdict, chat.1201, the missed note
    assert main(["judge", str(trace), "--answers", str(answers), "--pipelines", "default"]) == 0
    capsys.readouterr()
    return trace


@pytest.mark.parametrize("args, needle", [
    (["--name", "a" * 300], "a case id is at most 120 characters"),
    (["--out", "a-file"], "--out 'a-file': must be a folder (it is a file)"),
    (["--out", "a-file/below"], "cannot make the folder"),
])
def test_capture_refuses_what_it_cannot_write_with_one_line(project, judged, capsys, args, needle):
    (project / "a-file").write_text("not a folder\n", encoding="utf-8")
    assert main(["capture", str(judged), "--query", "1", *args]) == 2
    line = _one_error_line(capsys)
    assert needle in line
    assert not list(project.glob("challenge/*battery*"))


# --- what is not a regular file ----------------------------------------------------------
# Each runs the command in a child process with a timeout: a reader that waits on a FIFO
# fails the test instead of hanging the suite.

def _garden(cwd: Path, *args: str, timeout: float = 120) -> tuple[int, str]:
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", "import sys; from garden.cli import main; sys.exit(main())", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "GARDEN_HOME": str(cwd / ".garden")})
    return proc.returncode, proc.stdout + proc.stderr


def test_a_fifo_named_like_a_story_is_refused_not_waited_on(project):
    import os

    os.mkfifo(project / "fixtures" / "pipe.yaml")
    code, out = _garden(project, "check", "fixtures/pipe.yaml")
    assert code != 0 and "pipe.yaml: is a FIFO, not a regular file; refused" in out
    code, out = _garden(project, "doctor")
    assert "pipe.yaml" in out
    code, out = _garden(project, "backup", "--out", str(project / "b.tar.gz"))
    assert code != 0 and "pipe.yaml" in out and not (project / "b.tar.gz").exists()


def test_a_trace_that_is_a_fifo_or_a_device_is_refused(project):
    import os

    os.mkfifo(project / "trace-2030-01-12.jsonl")
    code, out = _garden(project, "compare", "trace-2030-01-12.jsonl", "--pipelines", "bm25")
    assert code == 2 and "is a FIFO, not a regular trace file; refused" in out
    (project / "zero.jsonl").symlink_to("/dev/zero")
    code, out = _garden(project, "judge", "zero.jsonl", "--pipelines", "bm25")
    assert code == 2 and "is a character device, not a regular trace file; refused" in out


def test_a_longmemeval_file_that_is_a_fifo_is_refused(tmp_path):
    import os

    os.mkfifo(tmp_path / "longmemeval_s.json")
    code, out = _garden(tmp_path, "import", "longmemeval", "longmemeval_s.json", "--out", "out")
    assert code == 2 and "longmemeval_s.json: not a file" in out and not (tmp_path / "out").exists()


# --- no write through a planted link -------------------------------------------------------


def test_explore_never_writes_through_a_link_planted_at_its_temporary_name(project, capsys):
    import os

    outside = project / "outside.txt"
    outside.write_text("precious\n", encoding="utf-8")
    # the name the page used to be written under first, predictable from the process id
    (project / f".page.html.{os.getpid()}.tmp").symlink_to(outside)
    assert main(["explore", "aurora-ridge", "Who sleeps in the afternoon?", "--out", "page.html"]) == 0
    assert outside.read_text(encoding="utf-8") == "precious\n"
    assert "<html" in (project / "page.html").read_text(encoding="utf-8").lower()


def test_explore_refuses_an_out_that_is_a_link(project, capsys):
    outside = project / "outside.txt"
    outside.write_text("precious\n", encoding="utf-8")
    (project / "page.html").symlink_to(outside)
    assert main(["explore", "aurora-ridge", "Who sleeps in the afternoon?", "--out", "page.html"]) == 2
    assert "page.html: is a symbolic link; refused" in _one_error_line(capsys)
    assert outside.read_text(encoding="utf-8") == "precious\n" and (project / "page.html").is_symlink()


def test_a_seed_past_the_bound_is_refused_with_the_bound_it_breaks(project, capsys):
    assert main(["generate", "big", "--records", "200", "--seed", str(10 ** 30)]) == 2
    line = _one_error_line(capsys)
    assert "--seed" in line and "a whole number from 0 to 999,999,999,999" in line


@pytest.mark.skipif(not LOCOMO.exists(), reason="the LoCoMo conversations are not beside the project")
def test_a_locomo_folder_reports_every_kind_of_problem_in_one_run(tmp_path, capsys):
    folder = tmp_path / "convs"
    folder.mkdir()
    (folder / "a-broken.json").write_text("{not json", encoding="utf-8")          # a reading problem
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    data["session_1_date_time"] = "someday"                                         # a building problem
    (folder / "b-undated.json").write_text(json.dumps(data), encoding="utf-8")
    assert main(["import", "locomo", str(folder), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "a-broken.json:1:2: not JSON" in err
    assert "b-undated.json" in err and "field session_1_date_time: not a date" in err
    assert not (tmp_path / "out").exists()


def test_generate_force_replaces_all_or_nothing(project, capsys):
    assert main(["generate", "twin", "--records", "200", "--seed", "1"]) == 0
    story = project / "fixtures" / "twin.yaml"
    before = story.read_bytes()
    cases = project / "cases"
    import shutil

    shutil.rmtree(cases)
    cases.write_text("a file where the cases folder goes\n", encoding="utf-8")
    assert main(["generate", "twin", "--records", "200", "--seed", "2", "--force"]) == 2
    line = _one_error_line(capsys)
    assert "cases" in line and "nothing replaced" in line
    assert story.read_bytes() == before                     # the story was not replaced alone
    assert not [p for p in (project / "fixtures").iterdir() if p.name.startswith(".twin")]
    cases.unlink()
    assert main(["generate", "twin", "--records", "200", "--seed", "2", "--force"]) == 0
    assert story.read_bytes() != before and (cases / "twin").is_dir()
    assert not [p for p in cases.iterdir() if p.name.startswith(".")]


def test_compare_shows_a_traced_querys_escape_sequences_and_markup_as_text(project, capsys):
    assert main(["query", "aurora-ridge", "How do we keep spare batteries warm?"]) == 0
    capsys.readouterr()
    [trace] = sorted((project / ".garden" / "traces").glob("trace-*.jsonl"))
    event = json.loads(trace.read_text(encoding="utf-8").splitlines()[0])
    # words no record holds: bm25 serves nothing, dense its nearest, so the two disagree and
    # the disagreement line shows the query
    event["query"] = ESCAPES + "[bold red]quokka[/] zebra?"
    trace.write_text(json.dumps(event) + "\n", encoding="utf-8")
    assert main(["compare", str(trace), "--pipelines", "bm25,dense", "--source", "query"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    shown = " ".join(out.split())   # the disagreement line is wrapped at 80 columns, in a pipe too
    assert "\\x1b[2J" in shown and "[bold red]quokka[/] zebra?" in shown


def test_a_home_the_user_cannot_write_is_one_line(project, capsys, monkeypatch):
    """As a user without write access to the garden home meets it (the tests run as a user
    who can write anywhere, so the refusal is raised where the trace is written)."""
    import garden.evaluation.runner as runner_mod

    denied = project / ".garden" / "traces" / "trace-2030-01-12.jsonl"

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(denied))

    monkeypatch.setattr(runner_mod, "write_trace", refuse)
    assert main(["query", "aurora-ridge", "Who sleeps in the afternoon?"]) == 2
    line = _one_error_line(capsys)
    assert line == (f"garden: {denied}: Permission denied: the user running the garden cannot read or write it")


TYPED = "\x1b[2J\x1b]0;owned\x07\x1b[31m"  # what a careless paste or a hostile script types


@pytest.mark.parametrize("argv", [["query", "aurora-ridge", "camp", "stove" + TYPED],
                                  [TYPED], ["run", "--pipeline", "bm25", "--no-such" + TYPED]])
def test_a_usage_error_shows_what_was_typed_as_text(project, capsys, argv):
    """argparse quotes an unknown argument or an invalid choice as it was typed."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "\\x1b[2J" in err


STORY_WITH_ESCAPES = """story: esc-marsh
project: esc-marsh
topics: {{tide: {{}}}}
records:
  - id: log.tide
    kind: note
    at: 2031-05-02
    text: "The spring tide {e}reached the second marker of the boardwalk."
    topics: [tide]
"""


@pytest.mark.parametrize("argv", [["query", "esc-marsh", "spring tide", "--pipeline", "bm25"],
                                  ["query", "esc-marsh", "spring tide", "--pipeline", "bm25", "--json"],
                                  ["run", "regression/esc-tide.yaml", "--pipeline", "bm25"],
                                  ["contrast", "regression/esc-tide.yaml"],
                                  ["ablate", "regression/esc-tide.yaml"],
                                  ["compare", "regression/esc-tide.yaml", "--pipelines", "bm25,bm25s"]])
def test_record_text_holding_escape_sequences_is_shown_as_text(home, capsys, argv):
    """A story is a file anyone may have written: what a command prints of its records
    shows their control characters, never sends them to the terminal."""
    (home / "fixtures").mkdir()
    (home / "regression").mkdir()
    escaped = TYPED.encode("unicode_escape").decode()
    (home / "fixtures" / "esc-marsh.yaml").write_text(STORY_WITH_ESCAPES.format(e=escaped), encoding="utf-8")
    (home / "regression" / "esc-tide.yaml").write_text(
        "id: esc-tide\nstory: esc-marsh\nas_of: 2031-05-03\nquery: How high did the spring tide reach?\n"
        "expect: {include: [log.tide]}\n", encoding="utf-8")
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\x07" not in out + err
