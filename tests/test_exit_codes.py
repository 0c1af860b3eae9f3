"""One exit-code contract for every command (0 success, 1 a check or regression failed,
2 bad input or usage), and every problem of a bad input reported in one pass."""
from __future__ import annotations

import json

import pytest
import yaml

from garden.cli import main


def run_cli(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def trace_lines(project) -> int:
    folder = project / ".garden" / "traces"
    if not folder.is_dir():
        return 0
    return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in folder.glob("*.jsonl"))


BAD_STORY = "story: bad\nproject: bad\nrecords:\n  - {id: a, kind: note, text: x, topics: [nothere]}\n"


def test_the_same_bad_story_is_a_finding_to_check_and_bad_input_to_query_and_run(project, capsys):
    (project / "fixtures" / "bad.yaml").write_text(BAD_STORY, encoding="utf-8")
    (project / "regression" / "on-bad.yaml").write_text(
        "id: on-bad\nstory: bad\nas_of: 2030-01-06\nquery: what about x?\n", encoding="utf-8")

    code, out, _ = run_cli(["check", "bad"], capsys)
    assert code == 1 and "'nothere'" in out

    code, out, err = run_cli(["query", "bad", "what about x?", "--pipeline", "bm25"], capsys)
    assert code == 2 and "'nothere'" in err and out == ""

    code, out, err = run_cli(["run", "regression/on-bad.yaml", "--pipeline", "bm25"], capsys)
    assert code == 2 and "'nothere'" in err and out == ""


def test_a_case_with_two_dangling_ids_reports_both(project, capsys):
    (project / "regression" / "dangling.yaml").write_text(yaml.safe_dump({
        "id": "dangling", "story": "aurora-ridge", "as_of": "2030-01-06", "query": "gaming?",
        "expect": {"include": ["no.such.one"]},
        "controls": [{"name": "second", "expect": {"lead": "no.such.two"}}],
    }), encoding="utf-8")
    code, out, err = run_cli(["run", "regression/dangling.yaml", "--pipeline", "bm25"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and out == ""
    assert len(lines) == 2, lines
    assert "expect.include: 'no.such.one'" in lines[0]
    assert "control 'second'" in lines[1] and "expect.lead: 'no.such.two'" in lines[1]


def test_a_folder_with_two_bad_cases_reports_both_and_runs_nothing(project, capsys):
    folder = project / "regression"
    (folder / "bad-one.yaml").write_text("id: bad-one\nstory: aurora-ridge\nas_of: 2030-01-06\n"
                                         "query: gaming?\nexpect: {lead: missing.a}\n", encoding="utf-8")
    (folder / "bad-two.yaml").write_text("id: not-the-stem\nstory: aurora-ridge\nas_of: 2030-01-06\n"
                                         "query: gaming?\n", encoding="utf-8")
    before = trace_lines(project)
    code, out, err = run_cli(["run", "regression", "--pipeline", "bm25"], capsys)
    assert code == 2 and out == ""
    assert "bad-one.yaml" in err and "missing.a" in err
    assert "bad-two.yaml" in err and "file stem" in err
    assert trace_lines(project) == before, "a refused run writes no trace"


def test_two_missing_case_paths_are_both_named(project, capsys):
    code, _, err = run_cli(["run", "nowhere-a.yaml", "nowhere-b"], capsys)
    assert code == 2
    assert "nowhere-a.yaml" in err and "nowhere-b" in err and len(err.strip().splitlines()) == 2


@pytest.mark.parametrize("query, needle", [
    ("", "non-blank"),
    ("   ", "non-blank"),
    ("glacier\x00custard", "U+0000"),
    ("\x1b[2Jglacier", "U+001B"),
])
def test_an_empty_query_or_control_bytes_in_a_case_file_is_refused(project, capsys, query, needle):
    (project / "regression" / "odd.yaml").write_text(yaml.safe_dump({
        "id": "odd", "story": "aurora-ridge", "as_of": "2030-01-06", "query": query}), encoding="utf-8")
    before = trace_lines(project)
    code, out, err = run_cli(["run", "regression/odd.yaml", "--pipeline", "bm25"], capsys)
    assert code == 2 and out == ""
    assert "odd.yaml" in err and "field query" in err and needle in err
    assert trace_lines(project) == before


def test_a_control_query_and_a_session_query_are_checked_too(project, capsys):
    (project / "regression" / "odd.yaml").write_text(yaml.safe_dump({
        "id": "odd", "story": "aurora-ridge", "as_of": "2030-01-06", "query": "gaming?",
        "session": ["fine", "\x00"], "controls": [{"name": "blank", "query": " "}]}), encoding="utf-8")
    code, _, err = run_cli(["run", "regression/odd.yaml"], capsys)
    assert code == 2
    assert "field session" in err and "U+0000" in err
    assert "field controls.0.query" in err and "non-blank" in err


def test_a_query_naming_a_control_record_rejects_it_as_control_plane(project, capsys):
    code, out, err = run_cli(["query", "aurora-ridge", "What did control.import.0107 re-index?", "--json"],
                             capsys)
    assert code == 0, err
    packet = json.loads(out)
    assert "control.import.0107" not in [item["id"] for item in packet["items"]]
    assert {"id": "control.import.0107", "reason": "control_plane",
            "detail": "a control record: stored and validated, never served"} in packet["rejected"]


def test_a_failed_regression_is_1_and_a_failed_promotion_is_1(project, capsys):
    (project / "challenge" / "wrong.yaml").write_text(
        "id: wrong\nstory: aurora-ridge\nas_of: 2030-01-06\nquery: Why have I not felt like gaming recently?\n"
        "expect: {lead: pref.mira.milk}\n", encoding="utf-8")
    code, _, err = run_cli(["promote", "challenge/wrong.yaml", "--runs", "1"], capsys)
    assert code == 1 and "not promoted" in err
    assert (project / "challenge" / "wrong.yaml").is_file()


def test_usage_errors_are_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["no-such-command"])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main(["query"])
    assert info.value.code == 2
