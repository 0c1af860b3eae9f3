"""`garden compare` on LongMemEval (Wu et al., ICLR 2025; MIT): a released file read directly
(gzipped or not) or its import, the garden's measures by question type, the authors' own
beside them (`--scoring longmemeval`), and the abstention questions as negatives.

Every file is fictional (tests/longmemeval_files.py), in the released schema."""
from __future__ import annotations

import json
import math
import os
import types
from pathlib import Path

import pytest

from garden.cli import main
from garden.evaluation.longmemeval import AuthorsScoring, _Source, compare_longmemeval, is_longmemeval
from garden.formats.longmemeval import import_longmemeval, read_built
from longmemeval_files import fictional, write

PIPELINES = ["bm25s", "default"]
LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "conv-26.json"


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """The fictional file, gzipped and not, and its import, under one garden home."""
    root = tmp_path_factory.mktemp("longmemeval-compare")
    before = os.environ.get("GARDEN_HOME")
    os.environ["GARDEN_HOME"] = str(root / ".garden")
    plain = write(root / "longmemeval_s.json", fictional())
    gz = write(root / "questions.json.gz", fictional(), gz=True)
    import_longmemeval(plain, root / "imported")
    yield {"plain": plain, "gz": gz, "imported": root / "imported", "root": root}
    if before is None:
        os.environ.pop("GARDEN_HOME", None)
    else:
        os.environ["GARDEN_HOME"] = before


@pytest.fixture(scope="module")
def reports(sources):
    return {kind: compare_longmemeval(sources[kind], PIPELINES, "bm25s", scoring="longmemeval",
                                      plot=sources["root"] / f"{kind}.png")
            for kind in ("plain", "gz", "imported")}


def _comparable(report) -> dict:
    j = report.to_json()
    for key in ("source", "ms_per_query", "risk_coverage_plot"):
        j.pop(key)
    for block in (j["turn"], j["session"], *j["by_category"].values()):
        for values in block["pipelines"].values():
            values.pop("queries_per_s", None)
    return j


def test_a_file_its_gzipped_copy_and_its_import_give_the_same_figures(reports):
    plain = _comparable(reports["plain"])
    assert plain == _comparable(reports["gz"]) == _comparable(reports["imported"])


def test_what_is_judged_and_what_is_a_negative(reports):
    j = reports["plain"].to_json()
    # q1 and q2 have evidence turns; q3 is an abstention question; q4 has no marked turn in
    # its evidence session, so it is not asked, and is counted
    assert j["questions"] == 2 and j["turn"]["queries"] == 2
    assert j["haystacks"] == 4 and j["stores"] == {"asked": 3, "unjudged": 1}
    assert j["negatives"]["negatives"] == 1 and j["negatives"]["kind"] == "declared"
    assert "abstention" in j["negatives"]["how"]
    assert set(j["by_category"]) == {"single-session-user", "single-session-assistant"}
    packet = j["packet"]
    for name in PIPELINES:
        assert packet["groups"][name]["negatives"]["questions"] == 1
        assert packet["groups"][name]["answerable"]["questions"] == 2
    assert packet["auroc"]["bm25s"]["gate"] is None          # a bare retriever has no gate
    assert isinstance(packet["auroc"]["default"]["gate"], float)
    assert Path(reports["plain"].plot).is_file()
    assert "has_answer" in j["judgments"] and "either role" in j["judgments"]


def test_the_authors_scoring_leaves_out_what_they_leave_out(reports):
    authors = reports["plain"].to_json()["longmemeval_scoring"]
    # q2's only evidence turn is the assistant's: the authors leave it out; q1 stays
    assert authors["turn"]["all"]["queries"] == 1 and authors["session"]["all"]["queries"] == 1
    assert set(authors["turn"]["by_type"]) == {"single-session-user"}
    assert authors["ks"] == [1, 3, 5, 10, 30, 50]
    for level in ("turn", "session"):
        for name in PIPELINES:
            values = authors[level]["all"]["pipelines"][name]
            assert set(values) == {f"{m}@{k}" for k in authors["ks"] for m in ("recall_any", "recall_all", "ndcg_any")}
            assert all(0.0 <= v <= 1.0 for v in values.values())
        # one pipeline against the baseline: nothing to correct for
        assert "Holm" not in json.dumps(authors[level]["all"]["tests"]["correction"])
    assert "user turns" in authors["judgments"] and "answer_" in authors["judgments"]


def _first_store(path: Path):
    report, built = read_built(path)
    for b in built:
        if b.evidence and not b.abstention:
            from garden.evaluation.longmemeval import conversation_of

            return conversation_of(b)
    raise AssertionError("no judged question")


def test_the_authors_measures_of_a_hand_ranked_question(tmp_path):
    """q1's haystack: the shared session (user 1, assistant 2) and answer_pot_1 (user 1,
    assistant 2, user 3 marked has_answer, a blank assistant turn left out). User turns, the
    authors' corpus: shared.1, pot.1, pot.3; gold: pot.3."""
    conv = _first_store(write(tmp_path / "f.json", fictional()))
    shared, pot = "sharegpt_clay9xq_0-", "answer_pot_1"
    ids = {r.id for r in conv.story.records}
    s1 = next(i for i in ids if i.startswith(shared) and i.endswith(".1"))
    s2 = s1[:-2] + ".2"
    question = conv.questions[0]
    assert question.evidence == [f"{pot}.3"]
    scoring = AuthorsScoring()
    # a ranking of every turn: the assistant's turns are skipped, leaving pot.1, shared.1, pot.3;
    # the sittings ranked shared first, then pot
    sittings = [(s1, s2), (f"{pot}.1", f"{pot}.2", f"{pot}.3")]
    scoring("p", conv, question, [s2, f"{pot}.1", f"{pot}.2", s1, f"{pot}.3"], sittings)
    turn = {m: v[question.qid] for m, v in scoring.values["turn"]["p"].items()}
    assert turn["recall_any@1"] == 0 and turn["recall_any@3"] == 1 and turn["recall_all@3"] == 1
    assert turn["ndcg_any@3"] == pytest.approx(1 / math.log2(3))        # gold third, ideal 1
    session = {m: v[question.qid] for m, v in scoring.values["session"]["p"].items()}
    # the ranking of sittings, read over their corpus of two sessions: pot, the gold, second
    assert session["recall_any@1"] == session["ndcg_any@1"] == 0
    # their discount leaves the second place whole: DCG 0 + 1/log2(2) = 1, over an ideal of 1
    assert session["recall_any@3"] == session["recall_all@3"] == 1 and session["ndcg_any@3"] == pytest.approx(1)
    scoring("q", conv, question, [], sittings[::-1])
    assert scoring.values["session"]["q"]["ndcg_any@1"][question.qid] == 1


def test_an_assistant_or_unprefixed_evidence_turn_is_not_the_authors_gold(tmp_path):
    data = fictional()
    data[0]["haystack_session_ids"][1] = data[0]["answer_session_ids"][0] = "evidence_pot_1"
    conv = _first_store(write(tmp_path / "f.json", data))
    assert conv.questions[0].evidence and AuthorsScoring.gold(conv.story, conv.questions[0]) == []
    scoring = AuthorsScoring()
    scoring("p", conv, conv.questions[0], conv.questions[0].evidence, [])
    assert scoring.values["turn"] == {} and scoring.category == {}


def test_the_file_is_streamed_one_question_at_a_time(sources):
    report, built = read_built(sources["plain"])
    assert isinstance(built, types.GeneratorType)
    assert sum(report.read.values()) == 4
    source = _Source(sources["plain"])
    first = next(iter(source))
    assert first[0].story.story.startswith("longmemeval-")


def test_detection(sources, tmp_path):
    assert is_longmemeval(sources["plain"]) and is_longmemeval(sources["gz"]) and is_longmemeval(sources["imported"])
    renamed = write(tmp_path / "questions.json", fictional())
    assert is_longmemeval(renamed)                      # by its keys, whatever its name
    assert not is_longmemeval(tmp_path)
    if LOCOMO.exists():
        assert not is_longmemeval(LOCOMO)


def test_compare_cli_on_a_longmemeval_file(sources, capsys):
    assert main(["compare", str(sources["gz"]), "--pipelines", "bm25s,default", "--scoring", "longmemeval",
                 "--plot", str(sources["root"] / "cli.png"), "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["longmemeval_scoring"]["turn"]["all"]["queries"] == 1
    assert j["risk_coverage_plot"].endswith("cli.png")
    assert main(["compare", str(sources["plain"]), "--pipelines", "bm25s", "--scoring", "longmemeval"]) == 0
    out = capsys.readouterr().out
    assert "authors' scoring, turn" in out and "authors' scoring, session" in out and "recall_all@5" in out
    assert "declared negatives" in out


def test_compare_cli_sets_the_run_beside_the_published_figures(sources, capsys):
    assert main(["compare", str(sources["plain"]), "--pipelines", "bm25s,default", "--against", "published",
                 "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    rows = {r["system"]: r for r in j["published"]}
    authors = j["longmemeval_scoring"]["session"]["all"]["pipelines"]
    assert rows["default"]["figures"]["recall_all@5"] == authors["default"]["recall_all@5"]
    assert any(r["source"] != "this run" for r in j["published"])
    assert main(["compare", str(sources["plain"]), "--pipelines", "bm25s", "--against", "published"]) == 0
    out = capsys.readouterr().out
    assert "beside the published figures" in out and "ndcg@10" in out and "500 of S" in out


@pytest.mark.parametrize("args, needle", [
    (["--negatives", "foreign"], "brings its own negatives"),
    (["--judgments", "x.qrels"], "grades a trace's questions (`garden judge`); the longmemeval kind does not"),
    (["--pipelines", "locomo-fusion"], "LoCoMo only"),
])
def test_what_a_longmemeval_comparison_refuses(sources, capsys, args, needle):
    argv = ["compare", str(sources["plain"]), "--pipelines", "bm25s"] + args
    if "--pipelines" in args:
        argv = ["compare", str(sources["plain"])] + args
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


def test_metrics_and_trec_files_reach_a_longmemeval_comparison(sources, tmp_path, capsys):
    trec = tmp_path / "runs"
    assert main(["compare", str(sources["plain"]), "--pipelines", "bm25s", "--metrics", "RR", "--trec-dir",
                 str(trec), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["measures"][-1] == "RR" and "RR" in report["session"]["pipelines"]["bm25s"]
    assert {"bm25s.run", "qrels", "bm25s.session.run", "session.qrels"} == {p.name for p in trec.iterdir()}
    judged = {line.split()[0] for line in (trec / "qrels").read_text().splitlines()}
    assert len(judged) == report["questions"]
    assert all(len(line.split()) == 6 for line in (trec / "bm25s.run").read_text().splitlines())


def test_scoring_longmemeval_is_refused_elsewhere(project, capsys):
    assert main(["compare", "regression", "--pipelines", "bm25", "--scoring", "longmemeval"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--scoring" in err[0] and "regression" in err[0]


def test_against_published_is_refused_elsewhere(project, capsys):
    assert main(["compare", "regression", "--pipelines", "bm25", "--against", "published"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--against" in err[0] and "regression" in err[0]


def _bad_files() -> dict[str, object]:
    q = fictional()
    wrong_type = json.loads(json.dumps(q))
    wrong_type[1]["haystack_sessions"][0][0]["role"] = "narrator"
    missing = json.loads(json.dumps(q))
    del missing[0]["question_date"]
    return {"wrong_type": wrong_type, "missing": missing, "not_a_list": {"question_id": "x"}}


@pytest.mark.parametrize("kind, needle", [
    ("wrong_type", "question #1 (kiln_talk_02): field haystack_sessions[0][0].role"),
    ("missing", "question #0 (pot_glaze_01): field question_date: required field is missing"),
    ("one_byte", "longmemeval_s.json"),
])
def test_bad_input_is_located_and_nothing_is_written(home, capsys, kind, needle):
    path = home / "longmemeval_s.json"
    if kind == "one_byte":
        path.write_bytes(b"[")
    else:
        write(path, _bad_files()[kind])
    plot = home / "plot.png"
    assert main(["compare", str(path), "--pipelines", "bm25s,default", "--plot", str(plot)]) == 2
    err = capsys.readouterr().err
    assert needle in err and not plot.exists()
    assert not (home / ".garden" / "reports").exists()


def test_a_huge_string_is_a_located_problem(home, capsys):
    q = fictional()[:1]
    q[0]["haystack_sessions"][1][0]["content"] = "clay " * 400_000      # 2 MB: past what one story line holds
    path = write(home / "longmemeval_s.json", q)
    assert main(["compare", str(path), "--pipelines", "bm25s"]) == 2
    err = capsys.readouterr().err
    assert "question #0 (pot_glaze_01)" in err and "haystack_sessions[1][0].content" in err


def test_a_repeated_session_is_indexed_once_per_text(sources):
    """The shared session's turns carry the same ids and texts in both haystacks that hold
    it, so the embedding cache holds each once."""
    stores = [conv for conv, _ in _Source(sources["plain"])]
    texts = [{r.id: r.text for r in c.story.records if r.id.startswith("sharegpt_clay9xq_0-")} for c in stores]
    holding = [t for t in texts if t]
    assert len(holding) == 2 and holding[0] == holding[1]


def test_an_imported_question_and_the_file_agree_on_dates_and_as_of(sources):
    stores = {conv.story.story: conv for conv, _ in _Source(sources["imported"])}
    from_file = {conv.story.story: conv for conv, _ in _Source(sources["plain"])}
    assert set(stores) == set(from_file)
    for name, conv in stores.items():
        assert [q.as_of for q in conv.questions] == [q.as_of for q in from_file[name].questions]
        assert [q.evidence for q in conv.questions] == [q.evidence for q in from_file[name].questions]


def test_a_question_with_no_judged_store_is_an_error(home, capsys):
    q = fictional()[3:]                                  # the unjudged question only
    path = write(home / "longmemeval_s.json", q)
    assert main(["compare", str(path), "--pipelines", "bm25s"]) == 2
    assert "nothing to judge" in capsys.readouterr().err

