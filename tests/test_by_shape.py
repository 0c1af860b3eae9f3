"""`garden compare` and `garden ablate` by the question's shape: every figure over the
questions that gather and over those that point, on every kind of source, the shape read
from the question's text (garden/rerank/shape.py) and never from a category; and, where the
judgments carry evidence turns, the gold gathering class (evidence in two or more sittings)
beside the rule's rows, with the agreement of the two.

The stores are fictional: a lamp keeper and a baker talk over three sittings."""
from __future__ import annotations

import json
from pathlib import Path

import ir_measures
import pytest
from rich.cells import cell_len

from garden.cli import main
from garden.evaluation.compare import compare_runs
from garden.evaluation.locomo import compare_locomo
from garden.evaluation.shapes import GOLD, agreement, agreement_line, by_shape, gold_gathering, shape_groups
from garden.rerank.shape import GATHERING, PINPOINT, shape_of

PIPELINES = ["bm25s", "bm25"]   # bare retrievers: no model to load, seconds a comparison

# question -> (evidence turns, LoCoMo category); the shape of each is known by its words
QUESTIONS = {
    # gathering by the rule (a plural asked of a history), evidence in two sittings: gold too
    "Which loaves has Tomas baked for the market?": (["D1:4", "D3:1"], 1),
    # gathering by the rule (a count), evidence in one sitting: the rule reads more than the gold
    "How many times did Ilse climb the north tower?": (["D1:3"], 4),
    # pinpoint by the rule, evidence in two sittings: gold the rule misses
    "Where did the storm leave the weather vane?": (["D2:2", "D3:2"], 4),
    # pinpoint by the rule and by the gold
    "What did Ilse replace on the lamp?": (["D1:3"], 2),
    "What colour is the harbour ferry?": (["D2:3"], 4),
}
EXPECTED_SHAPES = {
    "Which loaves has Tomas baked for the market?": GATHERING,
    "How many times did Ilse climb the north tower?": GATHERING,
    "Where did the storm leave the weather vane?": PINPOINT,
    "What did Ilse replace on the lamp?": PINPOINT,
    "What colour is the harbour ferry?": PINPOINT,
}


# each sitting: its date, and its turns as (speaker, text)
SITTINGS = [
    ("9:10 am on 3 March, 2024", [
        ("Ilse", "The lamp on the north tower cracked last night."),
        ("Tomas", "Did you climb up to fix it?"),
        ("Ilse", "Yes, I climbed up and replaced the lamp glass before dawn."),
        ("Tomas", "I baked rye loaves for the harbour market.")]),
    ("4:00 pm on 20 April, 2024", [
        ("Tomas", "The market sold out by noon."),
        ("Ilse", "A storm knocked the weather vane off the tower."),
        ("Tomas", "The harbour ferry is painted green this year.")]),
    ("8:00 am on 2 May, 2024", [
        ("Tomas", "This week I baked seed loaves and oat loaves for the market."),
        ("Ilse", "The vane was found in the dunes behind the storm wall.")]),
]


def conversation(categories: dict[str, int] | None = None) -> dict:
    """The fictional conversation in LoCoMo's layout, its questions' categories as given
    (those of QUESTIONS by default)."""
    categories = categories or {q: cat for q, (_, cat) in QUESTIONS.items()}
    data = {"speaker_a": "Ilse", "speaker_b": "Tomas",
            "qa": [{"question": q, "answer": "x", "evidence": evidence, "category": categories[q]}
                   for q, (evidence, _) in QUESTIONS.items()]}
    for n, (when, turns) in enumerate(SITTINGS, 1):
        data[f"session_{n}_date_time"] = when
        data[f"session_{n}"] = [{"speaker": who, "dia_id": f"D{n}:{i}", "text": text}
                                for i, (who, text) in enumerate(turns, 1)]
    return data


def write(path: Path, data) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The conversation as LoCoMo, compared under the bare retrievers, with its report."""
    root = tmp_path_factory.mktemp("by-shape")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GARDEN_HOME", str(root / ".garden"))
        mp.setenv("GARDEN_TRACE", "0")
        source = write(root / "conv-1.json", conversation())
        report = compare_locomo(source, PIPELINES, "bm25s", permutations=200)
        yield {"root": root, "source": source, "report": report, "json": report.to_json()}


def qids_of(report, texts) -> set[str]:
    return {q.qid for q in report.asked.values() if q.text in texts}


def test_the_fictional_questions_have_the_shapes_they_were_written_with():
    # the premise of every test below: the rule reads these texts as written
    assert {q: shape_of(q).kind for q in QUESTIONS} == EXPECTED_SHAPES


def test_the_rows_hold_the_questions_of_each_shape_and_the_gold(stores):
    report, data = stores["report"], stores["json"]["by_shape"]
    gathering = qids_of(report, [q for q, s in EXPECTED_SHAPES.items() if s == GATHERING])
    gold = qids_of(report, [q for q, (ev, _) in QUESTIONS.items() if len({e.split(":")[0] for e in ev}) >= 2])
    assert len(gathering) == 2 and len(gold) == 2 and len(gathering & gold) == 1
    assert report.by_shape.groups[GATHERING] == sorted(gathering)
    assert set(report.by_shape.groups[PINPOINT]) == set(report.asked) - gathering
    assert set(report.by_shape.groups[GOLD]) == gold
    assert data["questions"] == {GATHERING: 2, PINPOINT: 3, GOLD: 2}
    assert "garden/rerank/shape.py" in data["shape"] and "read from the judgments" in data["gold"]
    # the agreement, counted by hand: one of the two gold questions is read as gathering, and one
    # of the two the rule reads as gathering gathers by the gold
    assert data["agreement"] == {"gold_gathering": 2, "rule_gathering": 2, "both": 1,
                                 "gold_read_as_gathering": 0.5, "rule_gathering_gold": 0.5}
    for level in ("turn", "session"):
        assert set(data[level]) == {GATHERING, PINPOINT, GOLD}
        assert {row: block["queries"] for row, block in data[level].items()} == data["questions"]


def test_a_rows_figures_are_ir_measures_over_its_questions_alone(stores):
    report, data = stores["report"], stores["json"]["by_shape"]
    ndcg, success = ir_measures.parse_measure("nDCG@10"), ir_measures.parse_measure("Success@5")
    for row, qids in report.by_shape.groups.items():
        qrels = {q: {t: 1 for t in report.asked[q].evidence} for q in qids}
        for name in PIPELINES:
            run = {q: {t: float(100 - i) for i, t in enumerate(report.rankings[name][q])} for q in qids}
            direct = ir_measures.calc_aggregate([ndcg, success], qrels, run)
            figures = data["turn"][row]["pipelines"][name]
            assert figures["nDCG@10"] == pytest.approx(direct[ndcg], abs=1e-9)
            assert figures["Success@5"] == pytest.approx(direct[success], abs=1e-9)
    # and the rows do differ: a figure over every question is not a row's
    overall = stores["json"]["turn"]["pipelines"]["bm25s"]["nDCG@10"]
    assert any(data["turn"][row]["pipelines"]["bm25s"]["nDCG@10"] != pytest.approx(overall) for row in data["turn"])
    assert "vs_baseline" in data["turn"][GATHERING]["tests"]


def test_the_packet_is_given_by_shape_and_for_the_gold(stores):
    packet = stores["json"]["packet"]["by_shape"]
    for name in PIPELINES:
        rows = packet[name]["answerable"]
        assert {row: figures["questions"] for row, figures in rows.items()} == {GATHERING: 2, PINPOINT: 3, GOLD: 2}
        for figures in rows.values():
            assert 0 <= figures["evidence_covered"] <= 1 and 0 <= figures["answered"] <= 1
    # a row's coverage is the mean over its questions: the rows' weighted means give the overall one
    overall = stores["json"]["packet"]["groups"]["bm25s"]["answerable"]["evidence_covered"]
    rows = packet["bm25s"]["answerable"]
    assert (2 * rows[GATHERING]["evidence_covered"] + 3 * rows[PINPOINT]["evidence_covered"]) / 5 == \
        pytest.approx(overall)


def test_the_shape_is_never_read_from_the_category(stores, tmp_path, monkeypatch):
    monkeypatch.setenv("GARDEN_HOME", str(stores["root"] / ".garden"))
    monkeypatch.setenv("GARDEN_TRACE", "0")
    # every category turned about: the gathering questions labelled single-hop, the rest multi-hop
    turned = {q: 4 if s == GATHERING else 1 for q, s in EXPECTED_SHAPES.items()}
    report = compare_locomo(write(tmp_path / "conv-1.json", conversation(turned)), PIPELINES, "bm25s",
                            permutations=200).to_json()
    assert report["by_category"] != stores["json"]["by_category"]
    assert report["by_shape"] == stores["json"]["by_shape"]
    assert report["packet"]["by_shape"] == stores["json"]["packet"]["by_shape"]


def test_the_printed_report_reads_at_80_columns(stores, capsys, monkeypatch):
    monkeypatch.setenv("GARDEN_HOME", str(stores["root"] / ".garden"))
    monkeypatch.setenv("GARDEN_TRACE", "0")
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["compare", str(stores["source"]), "--pipelines", ",".join(PIPELINES)]) == 0
    out = capsys.readouterr().out
    assert all(cell_len(line) <= 80 for line in out.splitlines()), out
    text = " ".join(out.split())
    assert "turn level by shape" in text and "By shape:" in text
    for label in ("gathering (2)", "pinpoint (3)", "gold gathering (2)"):
        assert label in text
    assert "the rule reads 1 of 2 (0.500) gold gathering questions as gathering" in text


def test_shape_groups_and_agreement_by_hand():
    texts = {"2": "What books has Ida read?", "10": "What is the boat called?", "1": "How many cats does Ida have?"}
    groups = shape_groups(texts, gold=["10", "3"])
    assert groups == {GATHERING: ["1", "2"], PINPOINT: ["10"], GOLD: ["10"]}   # ids in natural order
    assert agreement(groups[GATHERING], groups[GOLD]) == {
        "gold_gathering": 1, "rule_gathering": 2, "both": 0, "gold_read_as_gathering": 0.0, "rule_gathering_gold": 0.0}
    assert agreement([], [])["gold_read_as_gathering"] is None
    assert agreement_line(agreement([], [])) == \
        "no question gathers by the gold; the rule reads no question as gathering"
    assert gold_gathering(["s1", "s1"]) is False and gold_gathering(["s1", "s2", "s1"]) is True


def test_a_row_without_a_judged_question_is_counted_and_left_out():
    qrels = {"1": {"a": 1}, "2": {"b": 1}}
    runs = {"x": {"1": [("a", 2.0), ("b", 1.0)], "2": [("a", 2.0), ("b", 1.0)]},
            "y": {"1": [("b", 2.0), ("a", 1.0)], "2": [("b", 2.0)]}}
    report = compare_runs(qrels, runs, "x", ["RR"], permutations=50)
    shapes = by_shape(report, {"1": "What is the boat called?", "2": "Where is the key?", "3": "Which cats has Ida?"})
    assert shapes.groups == {GATHERING: [], PINPOINT: ["1", "2"]}   # "3" is not judged: in no row
    assert set(shapes.reports) == {PINPOINT} and shapes.agreement is None
    assert shapes.reports[PINPOINT].evaluation.aggregates == report.evaluation.aggregates
    assert "no judged question: gathering (0)" in str(shapes.table().caption)


def test_cases_and_a_collection_are_given_by_shape_though_they_have_no_category(project, capsys):
    from garden.evaluation.replay import replays_from_cases

    texts = [r.spec.query for r in replays_from_cases(sorted(Path("regression").glob("*.yaml"))) if r.graded]
    data = _json(capsys, "compare", "regression", "--pipelines", "bm25s,bm25")
    expected = {s: sum(shape_of(t).kind == s for t in texts) for s in (GATHERING, PINPOINT)}
    assert data["by_shape"]["questions"] == expected and expected[GATHERING] > 0
    assert "gold" not in data["by_shape"]   # cases carry no sittings of evidence: no gold row
    for row, block in data["by_shape"]["figures"].items():
        assert block["queries"] == expected[row]
    # a collection's queries are questions too
    root = project / "tiny"
    root.mkdir()
    lines = {"corpus.jsonl": [{"_id": "d1", "text": "Ida read the sea atlas and the tide tables"},
                              {"_id": "d2", "text": "the boat is called Heron"},
                              {"_id": "d3", "text": "Ida read a book of knots"}],
             "queries.jsonl": [{"_id": "1", "text": "What books has Ida read?"},
                               {"_id": "2", "text": "What is the boat called?"}]}
    for name, records in lines.items():
        (root / name).write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\td1\t1\n1\td3\t1\n2\td2\t1\n")
    data = _json(capsys, "compare", str(root), "--pipelines", "bm25,tfidf", "--metrics", "AP,RR")
    assert data["by_shape"]["questions"] == {GATHERING: 1, PINPOINT: 1}
    per_query = {row["qid"]: row["AP"]["bm25"] for row in data["per_query"]}
    assert data["by_shape"]["figures"][GATHERING]["pipelines"]["bm25"]["AP"] == pytest.approx(per_query["1"])
    assert data["by_shape"]["figures"][PINPOINT]["pipelines"]["bm25"]["AP"] == pytest.approx(per_query["2"])


def test_ablate_gives_each_stages_worth_by_shape(project, capsys, monkeypatch):
    case = "challenge/list-across-sittings.yaml"   # a list across three sittings, and a pinpoint control
    data = _json(capsys, "ablate", case, "--stages", "structure,phrase")
    rows = data["by_shape"]["questions"]
    assert rows == {GATHERING: 1, PINPOINT: 1} and data["queries"] == 2
    for stage in ("structure", "phrase"):
        by_row = data["stages"][stage]["by_shape"]
        assert set(by_row) == {row for row, n in rows.items() if n}
        for metrics in by_row.values():
            for m in data["measures"]:
                assert metrics[m]["delta"] == pytest.approx(metrics[m]["with"] - metrics[m]["without"])
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["ablate", case, "--stages", "structure,phrase"]) == 0
    out = capsys.readouterr().out
    assert all(cell_len(line) <= 80 for line in out.splitlines()), out
    text = " ".join(out.split())
    assert "worth by shape" in text and "structure: gathering (1)" in text and "phrase: pinpoint (1)" in text


def _json(capsys, *args) -> dict:
    capsys.readouterr()
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_longmemeval_gives_its_own_measures_by_shape_and_the_gold(tmp_path, monkeypatch):
    from garden.evaluation.longmemeval import compare_longmemeval
    from longmemeval_files import fictional, stamp, turn
    from longmemeval_files import write as write_file

    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    monkeypatch.setenv("GARDEN_TRACE", "0")
    # a list told in two sittings, beside the fictional file's pinpoint questions and its abstention
    glazes = {
        "question_id": "glaze_list_05", "question_type": "multi-session",
        "question": "Which glazes have I tried on my mugs?", "answer": "tenmoku and shino",
        "question_date": stamp(2023, 9, 1),
        "haystack_session_ids": ["answer_glaze_1", "answer_glaze_2"],
        "haystack_dates": [stamp(2023, 8, 2), stamp(2023, 8, 20)],
        "haystack_sessions": [[turn("user", "I dipped my mugs in a tenmoku glaze today.", True)],
                              [turn("user", "This time the mugs got a shino glaze.", True)]],
        "answer_session_ids": ["answer_glaze_1", "answer_glaze_2"],
    }
    source = write_file(tmp_path / "longmemeval_s.json", [*fictional(), glazes])
    report = compare_longmemeval(source, PIPELINES, "bm25s", scoring="longmemeval", packets=False,
                                 permutations=200).to_json()
    # the garden judges two questions that point, and the list, which gathers by the rule and the gold
    assert report["by_shape"]["questions"] == {GATHERING: 1, PINPOINT: 2, GOLD: 1}
    assert report["by_shape"]["agreement"]["gold_read_as_gathering"] == 1.0
    # the authors' judge two of them (their gold is user-side): the teapot's glaze, and the list
    for level in ("turn", "session"):
        authors = report["longmemeval_scoring"][level]
        assert authors["all"]["queries"] == 2
        shapes = authors["by_shape"]
        assert shapes["questions"] == {GATHERING: 1, PINPOINT: 1, GOLD: 1}
        assert set(shapes["figures"]) == {GATHERING, PINPOINT, GOLD}
        # the two rows of the rule partition the questions: their mean is the mean over all
        for m in ("recall_all@5", "ndcg_any@10"):
            rows = [shapes["figures"][row]["pipelines"]["bm25"][m] for row in (GATHERING, PINPOINT)]
            assert sum(rows) / 2 == pytest.approx(authors["all"]["pipelines"]["bm25"][m])
