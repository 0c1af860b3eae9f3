"""`garden compare` on the shipped cases and on a trace written by `garden run`."""
from __future__ import annotations

import json
from pathlib import Path

import ir_measures
import pytest

from garden.cli import main
from garden.evaluation.replay import judgments
from garden.models import Expect





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
