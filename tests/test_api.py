"""The public API for notebooks and scripts (`garden.api`, re-exported by `garden`).

Each function is checked on the shipped story and cases for real content, not only for
shape: the packet it serves, the cases it passes, the contrasts it finds, the files it
moves. Bad input must raise GardenError with located lines, as the command line reports it.
"""
from __future__ import annotations

import datetime as dt
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from garden import GardenError, api
from garden.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[1]
GAMING = "Why have I not felt like gaming recently?"
REGRESSION = sorted(p.stem for p in (ROOT / "regression").glob("*.yaml"))


def test_import_garden_loads_no_model_stack():
    """A script that only lists pipelines or scaffolds a story must not pay for torch."""
    code = ("import sys, json, garden\n"
            "print(json.dumps({'heavy': [m for m in ('torch', 'sentence_transformers', 'sklearn', 'pandas')"
            " if m in sys.modules], 'query': garden.query is garden.api.query}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"heavy": [], "query": True}


def test_a_warm_contrast_and_compare_import_no_library_they_do_not_need(project):
    """Once the indexes are saved and the questions' vectors kept, the matrix and a
    comparison of its trace score from the saved arrays: neither scikit-learn, bm25s, the
    scipy.stats they and the t-test would pull in, nor the model's runtime is loaded (each
    costs an interactive command a second or more)."""
    env = {**os.environ, "GARDEN_HOME": str(project / ".garden"), "HF_HUB_OFFLINE": "1"}
    case = "regression/similar-wording.yaml"
    assert cli_main(["contrast", case]) == 0   # here: the indexes saved, the vectors kept
    code = ("import sys, json\n"
            "from garden.cli import main\n"
            f"assert main(['contrast', {case!r}]) == 0\n"
            "assert main(['compare', '.garden/traces', '--pipelines', 'bm25s,tfidf,default']) == 0\n"
            "print(json.dumps([m for m in ('sklearn', 'bm25s', 'scipy.stats', 'torch', 'onnxruntime')"
            " if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_query_serves_what_the_command_prints(project, capsys):
    packet = api.query("aurora-ridge", GAMING, as_of="2030-01-06")
    assert packet["items"][0]["id"] == "state.mira.gaming"
    assert {"id": "pref.mira.milk", "reason": "off_topic"} in [
        {"id": r["id"], "reason": r["reason"]} for r in packet["rejected"]]
    assert "fallback" not in packet
    assert cli_main(["query", "aurora-ridge", GAMING, "--as-of", "2030-01-06", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(packet))


def test_query_takes_a_loaded_story_a_path_and_a_date(project):
    story = api.load_story("aurora-ridge")
    assert story.name == "aurora-ridge" and "state.mira.gaming" in story.by_id
    by_object = api.query(story, GAMING, pipeline="bm25", as_of=dt.date(2030, 1, 6))
    by_path = api.query(project / "fixtures" / "aurora-ridge.yaml", GAMING, pipeline="bm25", as_of="2030-01-06")
    assert by_object == by_path
    # the bare retriever has no topic structure: the milk preference rides on wording
    assert "pref.mira.milk" in [item["id"] for item in by_object["items"]]


def test_query_takes_a_session_and_names_a_loaded_storys_file_in_the_trace(project):
    from garden.pipelines.traces import read_trace, trace_file

    story = api.load_story("aurora-ridge")
    path = project / "fixtures" / "aurora-ridge.yaml"
    api.query(story, GAMING, as_of="2030-01-06", session=["What does Mira play?"], story_path=path, trace=True)
    [event] = read_trace(trace_file(dt.date.today()))
    assert event.session == ["What does Mira play?"] and event.story_path == str(path)
    with pytest.raises(GardenError, match="session: query #2"):
        api.query(story, GAMING, session=["fine", "\x1b[31m"])


def test_query_hints_settings_and_budget_reach_the_pipeline(project):
    hinted = api.query("aurora-ridge", "Why have I not felt like it recently?", as_of="2030-01-06",
                       hints={"topics": ["gaming"]})
    assert hinted["items"][0]["id"] == "state.mira.gaming"
    tight = api.query("aurora-ridge", GAMING, as_of="2030-01-06", budget=50, settings={"standout": 1.0})
    assert tight["budget"]["limit"] == 50
    assert 0 < tight["budget"]["used"] <= 50


def test_query_names_a_story_from_a_folder_below_the_project(project, monkeypatch):
    """A notebook runs in notebooks/: the story name is found in the project's fixtures/."""
    (project / "notebooks").mkdir()
    monkeypatch.chdir(project / "notebooks")
    assert api.load_story("aurora-ridge").story == "aurora-ridge"


def test_api_defaults_are_the_library_defaults():
    """The API states its defaults in its signatures (so `help()` shows them) without
    importing the library at `import garden`; they must not drift from the library's."""
    from garden.evaluation.runner import PROMOTION_RUNS
    from garden.models import DEFAULT_BUDGET

    assert inspect.signature(api.query).parameters["budget"].default == DEFAULT_BUDGET
    assert inspect.signature(api.promote).parameters["runs"].default == PROMOTION_RUNS


def test_trace_is_written_only_when_asked(project):
    api.query("aurora-ridge", GAMING, as_of="2030-01-06", pipeline="bm25")
    assert api.trace_files() == []
    api.query("aurora-ridge", GAMING, as_of="2030-01-06", pipeline="bm25", trace=True)
    (path,) = api.trace_files()
    assert path.endswith(f"trace-{dt.date.today().isoformat()}.jsonl")
    (event,) = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    assert (event["query"], event["pipeline"], event["as_of"]) == (GAMING, "bm25", "2030-01-06")


def test_packet_table_keeps_packet_order(project):
    packet = api.query("aurora-ridge", GAMING, as_of="2030-01-06", pipeline="bm25")
    table = api.packet_table(packet)
    assert list(table["id"]) == [item["id"] for item in packet["items"]]
    assert table.index[0] == 1 and table.attrs["decision"] == "retrieve"


@pytest.mark.parametrize("call, message", [
    (lambda: api.load_story("no-such-story"), "no story named 'no-such-story'"),
    (lambda: api.load_story("fixtures/broken/typo-once.yaml"), "is not a canonical topic id"),
    (lambda: api.load_story(Path("fixtures/missing.yaml")), "does not exist"),
    (lambda: api.query("aurora-ridge", "   "), "non-blank"),
    (lambda: api.query("aurora-ridge", GAMING, budget=0), "positive whole number"),
    (lambda: api.query("aurora-ridge", GAMING, pipeline="nope"), "unknown pipeline 'nope'"),
    (lambda: api.query("aurora-ridge", GAMING, hints={"topic": ["gaming"]}), "hints: field topic: unknown field"),
    (lambda: api.query("aurora-ridge", GAMING, settings={"standout": 0.5}), "ratio of at least 1"),
    (lambda: api.query("aurora-ridge", GAMING, pipeline="bm25", settings={"standout": 2}), "no stage that uses"),
    (lambda: api.query("aurora-ridge", GAMING, as_of="last week"), "not a date"),
    (lambda: api.run_cases("no/such/cases"), "no such case file or folder"),
    (lambda: api.run_case("regression/nope.yaml"), "no such case file"),
    (lambda: api.compare("regression", "bm25,nope"), "unknown pipeline 'nope'"),
    (lambda: api.compare("regression", ["bm25"], metrics="NotAMetric"), "unknown metric"),
    (lambda: api.new_story("Bad Name"), "lower-case letters"),
    (lambda: api.promote("regression/budget.yaml"), "only a case in challenge/"),
    (lambda: api.promote("challenge/alias-overreach.yaml", runs=0), "at least one passing run"),
])
def test_bad_input_raises_garden_error(project, call, message):
    with pytest.raises(GardenError, match=message):
        call()


def test_run_cases_one_row_per_shipped_regression_case(project):
    table = api.run_cases("regression")
    assert isinstance(table, pd.DataFrame)
    assert sorted(table["case"]) == REGRESSION and len(table) == len(REGRESSION)
    assert table["passed"].all() and (table["suite"] == "regression").all()
    assert (table["pipeline"] == "default").all()
    assert all(f == [] for f in table["failures"])
    assert (table["controls_passed"] == table["controls"]).all() and table["controls"].sum() > 0
    report = table.attrs["report"]
    assert (report["passed"], report["failed"]) == (len(REGRESSION), 0)


def test_run_cases_failures_name_the_control(project):
    table = api.run_cases("regression/similar-wording.yaml", pipeline="bm25")
    (row,) = table.to_dict("records")
    assert not row["passed"] and row["controls_passed"] < row["controls"]
    assert any("pref.mira.milk" in f for f in row["failures"])
    assert any(f.startswith("control ") for f in row["failures"])
    assert api.run_cases_report("regression/similar-wording.yaml", "bm25")["failed"] == 1


def test_run_case_shows_the_packets(project):
    bare = api.run_case("regression/similar-wording.yaml", "bm25")
    full = api.run_case("regression/similar-wording.yaml")
    assert not bare["passed"] and full["passed"]
    assert "pref.mira.milk" in [item["id"] for item in bare["packet"]["items"]]
    assert [item["id"] for item in full["packet"]["items"]][0] == "state.mira.gaming"
    milk = next(c for c in full["controls"] if "milk question" in c["name"])
    assert milk["packet"]["items"][0]["id"] == "pref.mira.milk"


def test_contrast_flags_every_shipped_case(project):
    matrix = api.contrast("regression")
    assert sorted(matrix.index) == REGRESSION
    assert {"bm25", "tfidf", "dense", "hybrid", "default"} <= set(matrix.columns)
    assert list(matrix.columns)[-2:] == ["default", "contrast"]
    assert matrix["default"].all() and matrix["contrast"].all()
    baselines = [c for c in matrix.columns if c not in ("default", "contrast")]
    assert not matrix[baselines].all(axis=1).any()  # every row has a failing baseline
    summary = matrix.attrs["report"]["summary"]
    assert summary == {"cases": len(REGRESSION), "default_passed": len(REGRESSION), "contrasts": len(REGRESSION),
                       "default_failed_too": 0}


def test_compare_and_its_table_agree(project):
    report = api.compare("regression", ["bm25", "default"], metrics=["AP", "RR"])
    assert report["measures"] == ["AP", "RR"] and report["baseline"] == "bm25"
    assert report["pipelines"]["default"]["AP"] > report["pipelines"]["bm25"]["AP"]
    assert report["pipelines"]["default"]["forbidden_hits"] < report["pipelines"]["bm25"]["forbidden_hits"]
    assert any(row["disagree"] for row in report["per_query"])
    table = api.compare_table("regression", "bm25,default", metrics="AP,RR")
    assert list(table.index) == ["bm25", "default"] and list(table.columns[:2]) == ["AP", "RR"]
    assert table.loc["default", "AP"] == pytest.approx(report["pipelines"]["default"]["AP"])
    assert table.attrs["report"]["pipelines"]["bm25"]["forbidden_hits"] == table.loc["bm25", "forbidden_hits"]


def test_pipelines_lists_baselines_and_default_and_survives_the_subpackage():
    import garden.pipelines  # noqa: F401  the subpackage of the same name, imported by every query

    listed = api.pipelines()
    assert {"bm25", "bm25s", "tfidf", "dense", "hybrid", "default"} <= set(listed)
    assert listed["default"].startswith("structured pipeline on hybrid")
    assert callable(api.pipelines) and not callable(garden.pipelines)


def test_new_story_runs_and_promotes(project):
    paths = api.new_story("tidewell", root=project)
    assert paths == {"story": str(project / "fixtures" / "tidewell.yaml"),
                     "case": str(project / "challenge" / "tidewell-starter.yaml")}
    assert "decision.tidewell.tomatoes" in api.load_story(paths["story"]).by_id
    before = Path(paths["story"]).read_text()
    with pytest.raises(GardenError, match="already exists"):
        api.new_story("tidewell", root=project)
    assert Path(paths["story"]).read_text() == before
    table = api.run_cases(paths["case"])
    assert table.loc[0, "passed"] and table.loc[0, "suite"] == "challenge"
    moved = api.promote(paths["case"], runs=2)
    assert moved["to"] == str((project / "regression" / "tidewell-starter.yaml").resolve())
    assert moved["runs"] == 2 and all(r["passed"] for r in moved["results"])
    assert Path(moved["to"]).is_file() and not Path(paths["case"]).exists()


def test_promote_keeps_a_failing_case_where_it_is(project):
    with pytest.raises(GardenError, match="not promoted") as caught:
        api.promote("challenge/alias-overreach.yaml", runs=1)
    assert caught.value.status == 1
    assert (project / "challenge" / "alias-overreach.yaml").is_file()
    assert not (project / "regression" / "alias-overreach.yaml").exists()


HEAVY = ("sklearn", "torch", "transformers", "sentence_transformers", "bm25s")


def modules_a_query_loads(project, pipeline: str) -> list[str]:
    code = ("import sys, json\n"
            "from garden.cli import main\n"
            f"main(['query', 'aurora-ridge', 'camp stove fuel', '--pipeline', {pipeline!r}, '--json'])\n"
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_bm25_query_loads_neither_scikit_learn_nor_torch(project):
    """What a query needs, and no more: listing the retrievers' names imports their modules,
    and a module that imported its library at the top made every query pay for it (over a
    second for scikit-learn, through the tf-idf module)."""
    assert modules_a_query_loads(project, "bm25") == []


def test_a_default_query_needs_no_training_stack(project):
    """`default` encodes its query with the ONNX backend: once the model is exported (the
    first query here does it), a query imports neither torch nor transformers, which cost
    seconds before the first score."""
    modules_a_query_loads(project, "default")
    assert modules_a_query_loads(project, "default") == []
