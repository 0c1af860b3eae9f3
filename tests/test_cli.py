"""The command line: exit codes, JSON shapes, located one-line errors, nothing written on failure."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from garden.cli import main

GARDEN = str(Path(sys.executable).parent / "garden")




def run_cli(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_check_passes_on_the_shipped_story(project, capsys):
    code, out, _ = run_cli(["check"], capsys)
    assert code == 0
    assert "aurora-ridge" in out and "all valid" in out
    assert (project / ".garden" / "index" / "aurora-ridge.json").is_file()


@pytest.mark.parametrize("broken, needles", [
    ("typo-once", ["decision.field_test.logbook", "topics", "'feild_test'"]),
    ("typo-many", ["decision.field_test.sync", "note.field_test.kit", "'feild_test'"]),
    ("alias-label", ["decision.obs.night_watch", "entities", "'observatory captain'"]),
    ("bad-date", ["state.mira.gaming", "observed_at", "2030-01-32"]),
    ("confirmed-before-observed", ["state.mira.gaming", "last_confirmed_at", "2029-12-30"]),
    ("valid-to-before-from", ["state.mira.gaming", "valid_to", "2029-12-31"]),
])
def test_check_fails_on_each_broken_story_naming_record_field_value(project, capsys, broken, needles):
    code, out, _ = run_cli(["check", f"fixtures/broken/{broken}.yaml"], capsys)
    assert code == 1
    assert all(n in out for n in needles), out
    assert "Traceback" not in out


def test_failed_build_leaves_the_previous_index_in_place(project, capsys):
    story = project / "fixtures" / "aurora-ridge.yaml"
    assert run_cli(["check", "aurora-ridge"], capsys)[0] == 0
    index = project / ".garden" / "index" / "aurora-ridge.json"
    before = index.read_bytes()
    story.write_text(story.read_text().replace("topics: [gaming]\n    entities: [mira]",
                                               "topics: [gamng]\n    entities: [mira]", 1))
    code, out, _ = run_cli(["check", "aurora-ridge"], capsys)
    assert code == 1 and "'gamng'" in out
    assert index.read_bytes() == before
    assert not [p for p in index.parent.iterdir() if p.name.endswith(".tmp")]


KNOWN_MISS = ("id: known-miss\nstory: aurora-ridge\norigin: a deliberately wrong expectation\nas_of: 2030-01-06\n"
              "query: Why have I not felt like gaming recently?\nexpect: {lead: pref.mira.milk}\n")


def test_run_regression_and_challenge_exit_codes(project, capsys):
    (project / "challenge" / "known-miss.yaml").write_text(KNOWN_MISS)
    code, out, _ = run_cli(["run", "challenge", "--json"], capsys)
    data = json.loads(out)
    assert code == 0, "challenge failures never change the exit code"
    assert data["failed"] > 0, "the challenge ledger holds known misses"
    assert data["passed"] + data["failed"] == len(data["results"]) > 0
    assert all(r["suite"] == "challenge" for r in data["results"])
    assert "triage_fallbacks" in data
    code, out, _ = run_cli(["run", "regression", "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["failed"] == 0 and data["passed"] >= 5


def test_a_failing_regression_case_exits_1(project, capsys):
    (project / "regression").mkdir(exist_ok=True)
    (project / "regression" / "wrong-lead.yaml").write_text(
        "id: wrong-lead\nstory: aurora-ridge\nas_of: 2030-01-06\nquery: Why have I not felt like gaming recently?\n"
        "expect: {lead: pref.mira.milk}\n")
    code, out, _ = run_cli(["run", "regression/wrong-lead.yaml", "--json"], capsys)
    data = json.loads(out)
    assert code == 1
    assert data["results"][0]["failures"][0].startswith("lead: expected pref.mira.milk, got")


def test_query_json_shape(project, capsys):
    code, out, _ = run_cli(["query", "aurora-ridge", "Why have I not felt like gaming recently?",
                            "--as-of", "2030-01-06", "--json"], capsys)
    assert code == 0
    packet = json.loads(out)
    assert set(packet) >= {"decision", "reason", "warnings", "items", "rejected", "budget"}
    assert packet["items"][0]["id"] == "state.mira.gaming"
    assert set(packet["items"][0]) >= {"id", "kind", "fidelity", "labels", "score", "why", "text"}
    assert {"id": "pref.mira.milk", "reason": "off_topic"}.items() <= next(
        r for r in packet["rejected"] if r["id"] == "pref.mira.milk").items()
    assert packet["budget"]["used"] <= packet["budget"]["limit"] == 1200


def test_query_unknown_hint_warns_and_runs(project, capsys):
    code, out, _ = run_cli(["query", "aurora-ridge", "What did the observatory captain decide?",
                            "--hint", "topic=feild_test", "--json"], capsys)
    assert code == 0
    assert any("feild_test" in w for w in json.loads(out)["warnings"])


@pytest.mark.parametrize("value", ["0.9", "nan", "abc", "-1"])
def test_standout_below_one_is_refused_as_a_ratio(project, capsys, value):
    with pytest.raises(SystemExit) as exc:
        main(["query", "aurora-ridge", "anything", f"--standout={value}"])
    assert exc.value.code == 2
    assert "ratio" in capsys.readouterr().err


def test_case_settings_refuse_standout_below_one(project, capsys):
    (project / "challenge" / "bad-standout.yaml").write_text(
        "id: bad-standout\nstory: aurora-ridge\nas_of: 2030-01-06\nquery: gaming\nsettings: {standout: 0.5}\n")
    code, _, err = run_cli(["run", "challenge/bad-standout.yaml"], capsys)
    assert code == 2
    assert "bad-standout.yaml" in err and "settings.standout" in err and "ratio" in err


@pytest.mark.parametrize("content, needle", [
    ("id: x\nstory: aurora-ridge\nas_of: 2030-01-06\nquery: q\nexpect: {lead: [unclosed\n", "malformed YAML"),
    ("id: x\nstory: no-such-story\nas_of: 2030-01-06\nquery: q\n", "no-such-story"),
    ("id: x\nstory: aurora-ridge\nas_of: 2030-01-06\nquery: q\nexpect: {lead: state.nobody}\n", "state.nobody"),
    ("id: x\nstory: aurora-ridge\nas_of: 2030-01-06\nquery: q\nexpect: {leed: state.mira.gaming}\n", "leed"),
    ("id: x\nstory: aurora-ridge\nas_of: 2030-01-06\nquery: q\ncontrols: [{name: c, qeury: q}]\n", "qeury"),
])
def test_bad_case_input_is_one_located_line_exit_2(project, capsys, content, needle):
    path = project / "challenge" / "x.yaml"
    path.write_text(content)
    code, out, err = run_cli(["run", str(path)], capsys)
    assert code == 2
    assert needle in err and "x.yaml" in err
    assert "Traceback" not in err and out == ""


def test_unknown_pipeline_is_exit_2(project, capsys):
    code, _, err = run_cli(["run", "challenge", "--pipeline", "bm26"], capsys)
    assert code == 2 and "unknown pipeline 'bm26'" in err


def test_promote_moves_a_passing_case_and_refuses_a_failing_one(project, capsys):
    (project / "regression" / "budget.yaml").rename(project / "challenge" / "budget.yaml")
    passing = project / "challenge" / "budget.yaml"
    code, out, _ = run_cli(["promote", str(passing), "--runs", "2"], capsys)
    assert code == 0, out
    assert not passing.exists() and (project / "regression" / "budget.yaml").is_file()
    failing = project / "challenge" / "known-miss.yaml"
    failing.write_text(KNOWN_MISS)
    code, _, err = run_cli(["promote", str(failing)], capsys)
    assert code == 1
    assert "not promoted" in err and "lead: expected pref.mira.milk, got state.mira.gaming" in err
    assert failing.exists() and not (project / "regression" / "known-miss.yaml").exists()


def test_new_story_scaffold_checks_and_runs(project, capsys):
    code, out, _ = run_cli(["new-story", "tidewell"], capsys)
    assert code == 0
    assert run_cli(["check", "tidewell"], capsys)[0] == 0
    code, out, _ = run_cli(["run", "challenge/tidewell-starter.yaml", "--json"], capsys)
    assert code == 0 and json.loads(out)["results"][0]["passed"], out
    code, _, err = run_cli(["new-story", "tidewell"], capsys)
    assert code == 2 and "already exists" in err


def test_contrast_json_marks_contrasts(project, capsys):
    code, out, _ = run_cli(["contrast", "regression/similar-wording.yaml", "--json"], capsys)
    data = json.loads(out)
    assert code == 0
    row = data["cases"][0]
    assert row["case"] == "similar-wording" and row["contrast"] is True
    assert "bm25" in row["baselines_failing"] and row["pipelines"]["default"]["passed"]


def test_contrast_flags_a_case_no_baseline_fails(project, capsys):
    (project / "challenge" / "easy.yaml").write_text(
        "id: easy\nstory: aurora-ridge\nas_of: 2030-01-12\nquery: Why have I not felt like gaming recently?\n"
        "expect: {include: [state.mira.gaming]}\n")
    code, out, _ = run_cli(["contrast", "challenge/easy.yaml", "--json"], capsys)
    row = json.loads(out)["cases"][0]
    assert row["contrast"] is False and row["baselines_failing"] == []


def test_a_case_default_fails_too_is_no_contrast_and_cells_show_main_and_controls(project, capsys):
    # asks for a record nothing can lead with: every pipeline fails the main query
    (project / "challenge" / "hard.yaml").write_text(
        "id: hard\nstory: aurora-ridge\nas_of: 2030-01-12\nquery: Why have I not felt like gaming recently?\n"
        "expect: {lead: decision.field_test.sync}\n"
        "controls:\n  - name: same question\n    expect: {include: [state.mira.gaming]}\n")
    code, out, _ = run_cli(["contrast", "challenge/hard.yaml", "--json"], capsys)
    row = json.loads(out)["cases"][0]
    assert row["baselines_failing"] and not row["pipelines"]["default"]["passed"]
    assert row["contrast"] is False
    assert row["pipelines"]["default"]["main_passed"] is False and row["pipelines"]["default"]["controls"] == 1
    code, out, _ = run_cli(["contrast", "challenge/hard.yaml"], capsys)
    [row] = [line.split() for line in out.splitlines() if line.startswith("  hard ")]
    # every pipeline fails the main query; the one control passes everywhere, so no n/m
    assert row == ["hard", *["✗"] * 6, "no"], out
    assert "hard: no: default fails it too" in " ".join(out.split()) and "0/0" not in out


def test_pipelines_lists_every_retriever_and_default(project, capsys):
    code, out, _ = run_cli(["pipelines"], capsys)
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    assert code == 0
    assert {"bm25", "bm25s", "tfidf", "dense", "hybrid", "default"} <= set(names)


def test_console_script_reports_bad_input_without_traceback(tmp_path):
    bad = tmp_path / "story.yaml"
    bad.write_text("story: story\nproject: p\nrecords:\n  - id: a\n    kind: note\n    text: [unclosed\n")
    env = {**os.environ, "GARDEN_HOME": str(tmp_path / ".garden")}
    proc = subprocess.run([GARDEN, "check", str(bad)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 1, "to `check` a malformed story is its finding"
    assert "malformed YAML" in proc.stdout and "Traceback" not in proc.stderr
    proc = subprocess.run([GARDEN, "query", str(bad), "anything", "--pipeline", "bm25"], capture_output=True,
                          text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 2, "to every other command it is bad input"
    assert "malformed YAML" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_bad_retention_setting_is_a_clear_error(project, capsys, monkeypatch):
    import garden.evaluation.runner

    garden.evaluation.runner.PRUNE_TRACES.reset()
    monkeypatch.setenv("GARDEN_TRACE_DAYS", "two weeks")
    code, _, err = run_cli(["query", "aurora-ridge", "gaming", "--pipeline", "bm25"], capsys)
    assert code == 2 and "GARDEN_TRACE_DAYS" in err and "'two weeks'" in err


def test_check_goes_on_past_an_unreadable_story(project, capsys):
    (project / "fixtures" / "broken.yaml").write_text("story: broken\nrecords: [unclosed\n")
    code, out, err = run_cli(["check"], capsys)
    assert code == 1, "an unreadable story is a finding of the check, like an invalid one"
    assert "broken.yaml" in out and "malformed YAML" in out
    assert "fixtures/aurora-ridge.yaml ->" in out and out.startswith("ok ")


@pytest.mark.parametrize("args, needle", [
    (["query", "aurora-ridge", "   "], "query text: a query must hold at least one non-blank character"),
    (["query", "aurora-ridge", "gaming", "--budget", "-5"], "positive whole number of characters"),
    (["query", "aurora-ridge", "gaming", "--as-of", "2030-13-01"], "not a date"),
    (["query", "aurora-ridge", "gaming", "--hint", "foo"], "expected topic=ID or entity=ID"),
])
def test_bad_query_arguments_exit_2(project, capsys, args, needle):
    try:
        code = main(args)
    except SystemExit as exc:  # argparse refuses bad values before the command runs
        code = exc.code
    assert code == 2 and needle in capsys.readouterr().err


def test_a_retriever_variant_is_a_pipeline_name(project, capsys):
    code, out, _ = run_cli(["query", "aurora-ridge", "paper log", "--pipeline", "bm25:variant=plus", "--json"], capsys)
    assert code == 0 and json.loads(out)["items"]
    assert "bare bm25:variant=plus" in json.loads(out)["reason"]
    code, _, err = run_cli(["query", "aurora-ridge", "paper log", "--pipeline", "bm25:variant=zeta"], capsys)
    assert code == 2 and "unknown variant 'zeta'" in err
    code, _, err = run_cli(["query", "aurora-ridge", "paper log", "--pipeline", "bm25:colour=red"], capsys)
    assert code == 2 and "does not take those options" in err
    code, _, err = run_cli(["run", "regression/budget.yaml", "--pipeline", "bm25:variant"], capsys)
    assert code == 2 and "options are key=value" in err


def test_the_library_names_its_parameters_and_the_command_line_its_flags(tmp_path, capsys):
    """`generate(records=5)` is refused naming `records`; `garden generate --records 5`
    naming `--records`: one message, in each caller's own words."""
    from garden.errors import GardenError
    from garden.formats.generate import generate

    with pytest.raises(GardenError) as refused:
        generate("zz", 5, 0, out=tmp_path / "zz.yaml")
    assert refused.value.messages[0].startswith("`records` 5: a whole number from 200")
    assert main(["generate", "zz", "--records", "5", "--out", str(tmp_path / "zz.yaml")]) == 2
    err = capsys.readouterr().err
    assert "garden: --records '5': a whole number from 200" in err and "`" not in err.split(":")[1]


def test_a_backticked_word_that_is_not_a_flag_of_the_command_is_left_as_it_is():
    from garden.cli import with_flags

    flags = {"records": "--records", "trace_source": "--source"}
    assert with_flags("`trace_source` must be one of query, case", flags) == "--source must be one of query, case"
    assert with_flags("see `garden judge`; `records` and `seed`", flags) == "see `garden judge`; --records and `seed`"


def test_the_readmes_trace_path_says_where_the_traces_are_when_garden_home_is_elsewhere(project, capsys,
                                                                                        monkeypatch):
    """The README's `.garden/traces` is the home by default; with GARDEN_HOME naming another
    home, a `.garden/...` path that is not there says where that home keeps its traces."""
    home = project / "elsewhere"
    monkeypatch.setenv("GARDEN_HOME", str(home))
    assert main(["query", "kiln-lane", "What did the studio rent change to?", "--pipeline", "bm25"]) == 0
    capsys.readouterr()
    assert main(["compare", ".garden/traces", "--pipelines", "bm25"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("garden: .garden/traces: no such collection folder, case file or trace file; ")
    assert f"GARDEN_HOME is set: the traces are in {home / 'traces'}" in err
    assert main(["compare", str(home / "traces"), "--pipelines", "bm25", "--json"]) == 0


def test_a_packet_that_asks_back_gives_its_reason_and_its_question_as_sentences(project, capsys):
    code, out, _ = run_cli(["query", "aurora-ridge", "What did the captain decide?", "--json"], capsys)
    assert code == 0
    packet = json.loads(out)
    assert packet["decision"] == "ask" and packet["outcome"] == "asked" and packet["silent"] is None
    reason, question = packet["reason"].split(" Question: ")
    assert reason.endswith(".") and not reason.endswith("..") and question.endswith("?")


def test_version_prints_the_package_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"garden {version('pinecone-garden')}"
