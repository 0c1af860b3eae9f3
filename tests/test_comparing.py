"""`garden compare` on the shipped cases and on a trace written by `garden run`."""
from __future__ import annotations

import json
from pathlib import Path

import ir_measures
import pytest

from garden.cli import main
from garden.evaluation.replay import judgments
from garden.formats.cases import Expect





def cases_dir(project: Path) -> str:
    return "regression" if any((project / "regression").glob("*.yaml")) else "challenge"


def test_judgments_grade_the_lead_above_includes():
    rels = judgments(Expect(lead="a", include=["b", "a"], sequence=["c"], exclude=["d"]))
    assert rels == {"a": 2, "b": 1, "c": 1}


def test_compare_on_cases_reports_metrics_forbidden_hits_and_side_by_side(project, capsys):
    trec = project / "runs"
    code = main(["compare", cases_dir(project), "--pipelines", "bm25,default", "--baseline", "bm25",
                 "--trec-dir", str(trec), "--plot", str(project / "diff.png"), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["baseline"] == "bm25"
    for name in ("bm25", "default"):
        assert {"AP", "nDCG@10", "RR", "queries_per_s", "forbidden_hits"} <= set(data["pipelines"][name])
    assert data["pipelines"]["default"]["forbidden_hits"] < data["pipelines"]["bm25"]["forbidden_hits"]
    assert data["pipelines"]["default"]["AP"] > data["pipelines"]["bm25"]["AP"]
    assert "vs_baseline" in data["tests"] and "default" in data["tests"]["vs_baseline"]
    assert any(row["disagree"] for row in data["per_query"])
    run = list(ir_measures.read_trec_run(str(trec / "default.run")))
    assert run and all(r.doc_id for r in run)
    # the qrels beside the runs: trec_eval or ranx give the report's figure from the two files
    qrels = list(ir_measures.read_trec_qrels(str(trec / "qrels")))
    scored = ir_measures.calc_aggregate([ir_measures.parse_measure("AP")], qrels, run)
    assert list(scored.values())[0] == pytest.approx(data["pipelines"]["default"]["AP"], abs=1e-9)
    assert (project / "diff.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_replays_a_trace_written_by_garden_run(project, capsys):
    assert main(["run", "regression/similar-wording.yaml"]) == 0
    capsys.readouterr()
    traces = sorted((project / ".garden" / "traces").glob("trace-*.jsonl"))
    assert len(traces) == 1
    lines = traces[0].read_text().splitlines()
    assert len(lines) == 4  # the case and its three controls
    event = json.loads(lines[0])
    assert {"story", "query", "as_of", "hints", "budget", "settings", "stages", "packet", "timings_ms"} <= set(event)
    assert event["stages"]["candidates"] and event["stages"]["standout"]
    code = main(["compare", str(traces[0]), "--pipelines", "bm25,default", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["queries"] >= 3  # the skip control has nothing to judge
    assert data["pipelines"]["default"]["forbidden_hits"] == 0
    assert data["pipelines"]["bm25"]["forbidden_hits"] > 0


def test_a_trace_line_from_another_version_is_located(project, capsys):
    bad = project / "old.jsonl"
    bad.write_text('{"version": 0, "query": "x"}\n')
    code = main(["compare", str(bad), "--pipelines", "bm25"])
    err = capsys.readouterr().err
    assert code == 2 and f"{bad}:1" in err and "version" in err


@pytest.mark.parametrize("args, needle", [
    (["--pipelines", "bm25,nope"], "unknown pipeline 'nope'"),
    (["--pipelines", "bm25", "--metrics", "APX"], "unknown metric 'APX'"),
    (["--pipelines", "bm25", "--baseline", "dense"], "baseline 'dense' is not among"),
])
def test_bad_compare_arguments_exit_2(project, capsys, args, needle):
    code = main(["compare", "challenge", *args])
    assert code == 2 and needle in capsys.readouterr().err


def test_compare_on_a_collection_shows_each_query_side_by_side(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    root = tmp_path / "tiny"
    (root / "corpus").mkdir(parents=True)
    docs = {"d1": "glacier ice cores and snow", "d2": "camp stove kerosene fumes", "d3": "ice on the glacier edge"}
    (root / "corpus" / "docs.trec").write_text(
        "".join(f"<DOC>\n<DOCNO>{k}</DOCNO>\n{v}\n</DOC>\n" for k, v in docs.items()))
    (root / "query-text.trec").write_text(
        "<top>\n<num>1</num><title>\nglacier ice\n</title>\n</top>\n"
        "<top>\n<num>2</num><title>\nstove fumes\n</title>\n</top>\n")
    (root / "qrels").write_text("1 0 d1 1\n1 0 d3 1\n2 0 d2 1\n")
    code = main(["compare", str(root), "--pipelines", "bm25,tfidf", "--metrics", "AP,RR", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["queries"] == 2
    rows = {row["qid"]: row for row in data["per_query"]}
    assert set(rows) == {"1", "2"}
    assert rows["2"]["top"]["bm25"][0] == "d2" and rows["2"]["AP"]["bm25"] == 1.0
    assert set(rows["1"]["top"]["bm25"][:2]) == {"d1", "d3"}


# --- a trace is a log of distinct questions --------------------------------------------------


def _trace(project: Path) -> Path:
    (trace,) = sorted((project / ".garden" / "traces").glob("trace-*.jsonl"))
    return trace


def _compare_json(capsys, *args) -> dict:
    capsys.readouterr()
    assert main(["compare", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_repeated_runs_change_no_figure_and_no_significance(project, capsys):
    assert main(["run", "regression/similar-wording.yaml", "regression/current-state.yaml"]) == 0
    once = _compare_json(capsys, str(_trace(project)), "--pipelines", "bm25,default")
    for _ in range(3):
        assert main(["run", "regression/similar-wording.yaml", "regression/current-state.yaml"]) == 0
    again = _compare_json(capsys, str(_trace(project)), "--pipelines", "bm25,default")
    assert again["trace"]["events"] == 4 * once["trace"]["events"]
    assert again["trace"]["folded"] == 3 * once["trace"]["events"]
    assert again["trace"]["distinct"] == once["trace"]["distinct"]
    assert again["queries"] == once["queries"] > 0
    for name in ("bm25", "default"):
        for metric in once["measures"]:
            assert again["pipelines"][name][metric] == once["pipelines"][name][metric]
    assert again["tests"]["vs_baseline"] == once["tests"]["vs_baseline"]
    assert "judged by each case's expectations" in again["judgments"]["graded"]


def test_a_free_query_is_never_scored_against_the_packet_it_was_served(project, capsys):
    assert main(["query", "aurora-ridge", "Why have I not felt like gaming recently?", "--as-of", "2030-01-06",
                 "--json"]) == 0
    served = json.loads(capsys.readouterr().out)
    assert served["items"]  # default answered it: self-judging would give it AP 1.0
    report = _compare_json(capsys, str(_trace(project)), "--pipelines", "default,bm25")
    assert report["queries"] == 0 and report["judgments"]["graded"].startswith("none")
    assert "AP" not in report["pipelines"]["default"]
    assert report["trace"] == {"events": 1, "distinct": 1, "folded": 0, "judged": 0, "free": 1,
                               "case_without_item_judgments": 0, "judged_by_cases": 0, "adjudicated": 0,
                               "forbidden_only": 0, "free_unjudged": 1}
    agreement = report["agreement"]
    assert agreement["default"]["answered"] == 1.0
    assert 0 <= agreement["bm25"]["overlap_with_baseline"] <= 1
    # mixed with a case run, --source picks one kind of event
    assert main(["run", "regression/similar-wording.yaml"]) == 0
    cases_only = _compare_json(capsys, str(_trace(project)), "--pipelines", "default,bm25", "--source", "case")
    assert cases_only["trace"]["free"] == 0 and cases_only["queries"] > 0
    free_only = _compare_json(capsys, str(_trace(project)), "--pipelines", "default,bm25", "--source", "query")
    assert free_only["trace"]["judged"] == 0 and free_only["trace"]["distinct"] == 1


def test_source_applies_to_a_trace_only(project, capsys):
    assert main(["compare", "regression", "--pipelines", "bm25", "--source", "query"]) == 2
    assert "--source, --since and --until select events of traces" in capsys.readouterr().err


def test_a_case_declared_unanswerable_counts_the_pipelines_that_answer_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    monkeypatch.setenv("GARDEN_TRACE", "0")
    root = Path(__file__).resolve().parents[1]
    folder = tmp_path / "cases"
    folder.mkdir()
    # nothing in Aurora Ridge is about what was lost; each word matches one scattered record
    (folder / "lost-things.yaml").write_text(
        "id: lost-things\nstory: {}\nabout: nothing answers it\norigin: a test\ncategory: standout\n"
        "as_of: 2030-01-12\nquery: Was it the hut, the console or the pouch that we lost?\n"
        "expect: {{unanswerable: true}}\n".format(root / "fixtures" / "aurora-ridge.yaml"), encoding="utf-8")
    (folder / "gaming.yaml").write_text(
        "id: gaming\nstory: {}\nabout: answerable\norigin: a test\ncategory: structure\nas_of: 2030-01-12\n"
        "query: Why have I not felt like gaming recently?\nexpect: {{lead: state.mira.gaming}}\n"
        .format(root / "fixtures" / "aurora-ridge.yaml"), encoding="utf-8")
    assert main(["compare", str(folder), "--pipelines", "bm25s,default", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "1 questions declared unanswerable" in data["judgments"]["unanswerable"]
    assert data["pipelines"]["bm25s"]["unanswerable_answered"] == 1
    assert data["pipelines"]["default"]["unanswerable_answered"] == 0
    assert data["queries"] == 1  # the ranking measures judge the answerable question only
