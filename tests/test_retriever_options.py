"""Retriever options are read by their declared type and range; no NaN or infinity reaches
a score, a packet, a trace or --json."""
from __future__ import annotations

import inspect
import json
import math
from pathlib import Path

import pytest
from pydantic import ValidationError

from garden.cli import print_json, main
from garden.errors import GardenError
from garden.models import Packet, PacketItem
from garden.rerank.stages import Settings
from garden.pipelines.traces import TraceEvent
from garden.pipelines import scored
from garden.retrievers import Doc, make_retriever, number, parse_spec, registered, registry

BUILTINS = ("bm25", "bm25s", "tfidf", "dense", "hybrid", "cross")


def strict_json(text: str):
    """json.loads that refuses NaN and Infinity, as every strict JSON reader does."""
    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def trace_lines(project: Path) -> list[str]:
    return [line for f in sorted((project / ".garden" / "traces").glob("*.jsonl"))
            for line in f.read_text().splitlines() if line.strip()]


def cli(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


# --- refusals through the command line ---------------------------------------------

# (pipeline, what the one line must name)
BAD = [
    ("bm25:k1=abc", ["retriever bm25", "k1", "'abc'", "> 0"]),
    ("bm25:k1=nan", ["k1", "'nan'", "finite", "> 0"]),
    ("bm25:k1=inf", ["k1", "'inf'", "finite"]),
    ("bm25:k1=-inf", ["k1", "'-inf'", "finite"]),
    ("bm25:k1=1e999", ["k1", "'1e999'", "finite"]),
    ("bm25:k1=-5", ["k1", "'-5'", "> 0"]),
    ("bm25:k1=0", ["k1", "'0'", "> 0"]),  # rank-bm25 computes 0 / 0 for an absent term
    ("bm25s:k1=0", ["retriever bm25s", "k1", "'0'", "> 0"]),
    ("bm25:b=7", ["option b", "'7'", "from 0 to 1"]),
    ("bm25:b=nan", ["option b", "'nan'", "from 0 to 1"]),
    ("bm25:stem=1", ["stem", "'1'", "true or false"]),
    ("bm25:stopwords=yes", ["stopwords", "'yes'", "true or false"]),
    ("bm25:variant=zeta", ["unknown variant 'zeta'", "okapi, l, plus"]),
    ("bm25:idf=bm11", ["unknown idf 'bm11'", "lucene, okapi"]),
    ("bm25:colour=red", ["does not take those options", "'colour'", "variant, k1, b, idf, stopwords, stem"]),
    ("bm25s:k1=nan", ["retriever bm25s", "k1", "'nan'"]),
    ("bm25s:b=-0.1", ["retriever bm25s", "option b", "'-0.1'", "from 0 to 1"]),
    ("bm25s:method=okapi", ["unknown method 'okapi'", "lucene, robertson, atire, bm25l, bm25+"]),
    ("tfidf:analyzer=bytes", ["unknown analyzer 'bytes'", "word, char"]),
    ("tfidf:ngram_range=4-2", ["ngram_range", "'4-2'", "1 <= LOW <= HIGH"]),
    ("tfidf:ngram_range=0", ["ngram_range", "'0'", "1 <= LOW <= HIGH"]),
    ("tfidf:sublinear_tf=1", ["sublinear_tf", "'1'", "true or false"]),
    ("hybrid:k=0", ["retriever hybrid", "option k", "'0'", "> 0"]),
    ("hybrid:k=inf", ["option k", "'inf'", "finite"]),
    ("hybrid:depth=1.5", ["depth", "'1.5'", "whole number >= 1"]),
    ("hybrid:depth=0", ["depth", "'0'", "whole number >= 1"]),
    ("hybrid:retrievers=bm25+bm25", ["retrievers", "twice"]),
    ("dense:batch_size=0", ["retriever dense", "batch_size", "'0'", "whole number >= 1"]),
    ("dense:batch_size=1.5", ["batch_size", "'1.5'", "whole number >= 1"]),
    ("dense:backend=gpu", ["unknown backend 'gpu'", "torch, onnx, onnx-int8"]),
    ("default@dense:backend=gpu", ["unknown backend 'gpu'", "torch, onnx, onnx-int8"]),
]


@pytest.mark.parametrize("pipeline, needles", BAD, ids=[p for p, _ in BAD])
def test_a_bad_option_is_one_line_exit_2_nothing_printed_no_trace(project, capsys, pipeline, needles):
    code, out, err = cli(["query", "aurora-ridge", "glacier custard", "--pipeline", pipeline, "--json"], capsys)
    assert code == 2
    assert out == ""
    assert len(err) == 1, err
    assert all(n in err[0] for n in needles), err[0]
    assert "Traceback" not in err[0]
    assert trace_lines(project) == []


def test_the_example_message_word_for_word(project, capsys):
    code, _, err = cli(["query", "aurora-ridge", "glacier", "--pipeline", "bm25:k1=abc"], capsys)
    assert code == 2
    assert err == ["garden: retriever bm25: option k1 must be positive, a finite number > 0 (got 'abc')"]


def test_garden_run_refuses_a_bad_option_before_any_case_runs(project, capsys):
    code, out, err = cli(["run", "regression/triage.yaml", "--pipeline", "bm25:b=7"], capsys)
    assert code == 2 and out == ""
    assert err == ["garden: retriever bm25: option b must be a finite number from 0 to 1 (got '7')"]
    assert trace_lines(project) == []


def test_garden_compare_refuses_a_bad_option_in_its_list(project, capsys):
    code, out, err = cli(["compare", "regression", "--pipelines", "bm25,bm25:k1=-5"], capsys)
    assert code == 2 and out == ""
    assert err == ["garden: retriever bm25: option k1 must be positive, a finite number > 0 (got '-5')"]
    assert trace_lines(project) == []


def test_every_bad_option_of_one_spec_is_named_at_once(project, capsys):
    code, out, err = cli(["query", "aurora-ridge", "glacier", "--pipeline", "bm25:k1=abc:b=7:shape=round"], capsys)
    assert code == 2 and out == ""
    assert len(err) == 3, err
    assert any("'shape'" in line for line in err)
    assert any("k1" in line and "'abc'" in line for line in err)
    assert any("option b" in line and "'7'" in line for line in err)


def test_an_option_given_twice_is_refused(project, capsys):
    code, _, err = cli(["query", "aurora-ridge", "glacier", "--pipeline", "bm25:k1=1:k1=2"], capsys)
    assert code == 2 and len(err) == 1 and "k1 is given twice" in err[0]


# --- good options still run ----------------------------------------------------------


@pytest.mark.parametrize("pipeline", ["bm25:k1=1.2:b=0.5:stem=false", "bm25:k1=0.01:b=1", "bm25s:method=bm25l:k1=2",
                                      "tfidf:analyzer=char:ngram_range=2-4:sublinear_tf=true",
                                      "hybrid:retrievers=bm25+tfidf:k=10:depth=5"])
def test_good_options_run_and_print_strict_json(project, capsys, pipeline):
    code, out, err = cli(["query", "aurora-ridge", "paper log tablet", "--pipeline", pipeline, "--json"], capsys)
    assert code == 0, err
    packet = strict_json(out)
    assert packet["items"] and all(math.isfinite(item["score"]) for item in packet["items"])
    assert f"bare {pipeline}" in packet["reason"]
    (line,) = trace_lines(project)
    assert strict_json(line)["pipeline"] == pipeline


def test_typed_options_reach_the_retriever():
    bm25 = make_retriever("bm25:k1=2:b=0:stem=false:variant=l")
    assert (bm25.k1, bm25.b, bm25.variant) == (2.0, 0.0, "l")
    assert isinstance(bm25.k1, float) and bm25.analyzer.stem is False
    tfidf = make_retriever("tfidf:ngram_range=4:analyzer=char")
    assert tfidf.ngram_range == (4, 4)
    assert make_retriever("tfidf", ngram_range=[2, 3]).ngram_range == (2, 3)


def test_hybrid_members_are_named_with_plus_or_comma(monkeypatch):
    plus = make_retriever("hybrid:retrievers=bm25+tfidf:depth=3")
    comma = make_retriever("hybrid", retrievers="bm25, tfidf")
    assert list(plus.members()) == list(comma.members()) == ["bm25", "tfidf"]
    assert plus.depth == 3 and isinstance(plus.depth, int)


# --- the same rules for Python keywords ----------------------------------------------


@pytest.mark.parametrize("name, options, needles", [
    ("bm25", {"k1": float("nan")}, ["k1", "nan"]),
    ("bm25", {"k1": float("-inf")}, ["k1", "-inf"]),
    ("bm25", {"k1": "1.2"}, ["k1", "'1.2'"]),          # from Python the type must already be right
    ("bm25", {"stem": 1}, ["stem", "true or false"]),   # 1 is not a boolean
    ("bm25", {"b": True}, ["option b", "True"]),        # nor is True a number
    ("bm25s", {"b": 1.01}, ["option b", "1.01"]),
    ("tfidf", {"ngram_range": (2, 1)}, ["ngram_range", "(2, 1)"]),
    ("tfidf", {"ngram_range": (1.5, 2)}, ["ngram_range", "(1.5, 2)"]),
    ("hybrid", {"retrievers": ("bm25",), "depth": 1.5}, ["depth", "1.5", "whole number"]),
    ("hybrid", {"retrievers": ("bm25",), "depth": 2.0}, ["depth", "2.0", "whole number"]),
    ("hybrid", {"retrievers": ("bm25",), "k": float("nan")}, ["option k", "nan"]),
    ("hybrid", {"retrievers": ("bm25",), "options": {"bm25": {"k1": -1}}}, ["retriever bm25", "k1", "-1"]),
    ("dense", {"batch_size": 0}, ["batch_size", "0"]),
])
def test_python_keywords_are_checked_the_same_way(name, options, needles):
    with pytest.raises(GardenError) as error:
        make_retriever(name, **options)
    assert len(error.value.messages) == 1
    assert all(n in error.value.messages[0] for n in needles), error.value.messages


def test_a_keyword_overrides_the_spec_and_is_checked():
    assert make_retriever("bm25:k1=0.5", k1=2).k1 == 2.0
    with pytest.raises(GardenError, match="k1"):
        make_retriever("bm25:k1=0.5", k1=-2)


def test_parse_spec_never_makes_a_non_finite_float():
    assert parse_spec("bm25:k1=nan:b=inf:x=1e999:y=-inf") == (
        "bm25", {"k1": "nan", "b": "inf", "x": "1e999", "y": "-inf"})
    assert parse_spec("bm25:k1=1.5:b=1:stem=false") == ("bm25", {"k1": 1.5, "b": 1, "stem": False})


def test_an_option_value_may_carry_a_uri():
    """Only a colon followed by `key=` starts an option, so a URI's colons stay in its value."""
    assert parse_spec("milvus-dense:uri=http://127.0.0.1:19530:timeout=5") == (
        "milvus-dense", {"uri": "http://127.0.0.1:19530", "timeout": 5})
    assert parse_spec("x:path=/a:b/c") == ("x", {"path": "/a:b/c"})
    for bad, needle in [("bm25:abc", "got 'abc'"), ("bm25:=3", "got '=3'")]:
        with pytest.raises(GardenError, match=needle):
            parse_spec(bad)


def test_every_builtin_declares_exactly_its_constructor_keywords():
    known = registered()
    for name in BUILTINS:
        declared = known[name].options
        assert declared is not None, name
        # a fusion is also handed the registry that makes it: not an option a user gives
        injected = {"self", "registry"} if getattr(known[name].factory, "MAKES_MEMBERS", False) else {"self"}
        params = [p for p in inspect.signature(known[name].factory).parameters if p not in injected]
        assert list(declared) == params, name


# --- plugins: declared or not ------------------------------------------------------------


class Bonus:
    """A plugin-like retriever that declares nothing."""

    description = "test: constant scores plus a bonus"

    def __init__(self, bonus=0.0):
        self.name = "bonus"
        self.bonus = bonus
        self.ids = []

    def index(self, docs):
        self.ids = [d.id for d in docs]

    def score(self, query):
        return {i: 1.0 + self.bonus for i in self.ids}


class DeclaredBonus(Bonus):
    OPTIONS = {"bonus": number(0, 10)}


@pytest.fixture
def scratch():
    """The process's registry, put back as it was after the test."""
    with registry.scoped():
        yield registry


def test_an_undeclared_plugin_gets_its_options_and_its_typeerror_is_one_line(scratch):
    scratch.add("bonus", Bonus, origin="plugin test")
    assert make_retriever("bonus:bonus=0.5").plugin.bonus == 0.5
    with pytest.raises(GardenError) as error:
        make_retriever("bonus:colour=red")
    (line,) = error.value.messages
    assert "retriever bonus does not take those options" in line and "colour" in line and "\n" not in line


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "1e999"])
def test_an_undeclared_plugin_never_gets_a_non_finite_number(scratch, raw):
    scratch.add("bonus", Bonus, origin="plugin test")
    with pytest.raises(GardenError) as error:
        make_retriever(f"bonus:bonus={raw}")
    assert error.value.messages == [f"retriever bonus: option bonus must be a finite number (got {raw!r})"]
    with pytest.raises(GardenError, match="must be a finite number"):
        make_retriever("bonus", bonus=float(raw))


def test_a_plugin_can_declare_its_options_the_same_way(scratch):
    scratch.add("declared", DeclaredBonus, origin="plugin test")
    assert registered()["declared"].options is not None
    assert make_retriever("declared:bonus=3").plugin.bonus == 3.0
    with pytest.raises(GardenError) as error:
        make_retriever("declared:bonus=11")
    assert error.value.messages == ["retriever declared: option bonus must be a finite number from 0 to 10 (got '11')"]


# --- no non-finite score --------------------------------------------------------------


class Returns:
    """A plugin-like retriever returning one fixed value for every record."""

    description = "test: one fixed score"
    value: object = float("nan")

    def __init__(self):
        self.name = "fixed-score"
        self.ids = []

    def index(self, docs):
        self.ids = sorted(d.id for d in docs)

    def score(self, query):
        return {i: (self.value if i == self.ids[0] else 1.0) for i in self.ids}


def returning(value):
    return type("Returns", (Returns,), {"value": value})


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), "high"])
def test_scored_refuses_a_non_finite_score_naming_retriever_record_value(value):
    retriever = returning(value)()
    retriever.index([Doc("b", "x"), Doc("a", "y")])
    with pytest.raises(GardenError) as error:
        scored(retriever, "q", "fixed-score:v=1")
    assert error.value.messages == [
        f"retriever fixed-score:v=1: record a got the score {value!r}, which is not a finite number"]


def test_scored_names_the_fused_member_that_gave_the_bad_score(scratch):
    scratch.add("nan-scorer", returning(float("nan")), origin="plugin test")
    hybrid = make_retriever("hybrid", retrievers=("bm25", "nan-scorer"))
    hybrid.index([Doc("a", "amber lantern"), Doc("b", "granite quarry")])
    with pytest.raises(GardenError, match=r"retriever nan-scorer: record a got the score nan"):
        scored(hybrid, "lantern")


def test_scored_passes_finite_scores_through_unchanged():
    retriever = returning(0.25)()
    retriever.index([Doc("a", "x"), Doc("b", "y")])
    assert scored(retriever, "q") == ({"a": 0.25, "b": 1.0}, {"fixed-score": {"a": 0.25, "b": 1.0}})


@pytest.mark.parametrize("args", [
    ["query", "aurora-ridge", "glacier custard", "--pipeline", "nan-scorer", "--json"],
    ["query", "aurora-ridge", "glacier custard", "--pipeline", "nan-scorer"],
    ["run", "regression/triage.yaml", "--pipeline", "nan-scorer", "--json"],
])
def test_a_plugin_returning_nan_stops_the_command_and_writes_no_trace(project, capsys, scratch, args):
    scratch.add("nan-scorer", returning(float("nan")), origin="plugin test")
    code, out, err = cli(args, capsys)
    assert code == 2 and out == ""
    assert len(err) == 1 and "retriever nan-scorer: record " in err[0] and "score nan" in err[0], err
    assert trace_lines(project) == []


def test_a_trace_line_holds_only_finite_numbers(project, capsys, scratch):
    scratch.add("finite", returning(0.5), origin="plugin test")
    assert cli(["query", "aurora-ridge", "glacier custard", "--pipeline", "finite"], capsys)[0] == 0
    scratch.add("nan-scorer", returning(float("nan")), origin="plugin test")
    assert cli(["query", "aurora-ridge", "glacier custard", "--pipeline", "nan-scorer"], capsys)[0] == 2
    (line,) = trace_lines(project)  # the NaN query added none
    event = strict_json(line)
    assert event["pipeline"] == "finite"
    scores = [item["score"] for item in event["packet"]["items"]]
    scores += [v for cand in event["stages"]["candidates"] for v in cand["scores"].values()]
    assert scores and all(isinstance(s, float) and math.isfinite(s) for s in scores)


# --- the models and --json --------------------------------------------------------------


@pytest.mark.parametrize("field", ["phrase_weight", "min_share", "related_decay", "standout"])
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_settings_refuse_nan_and_infinity_naming_the_field(field, value):
    with pytest.raises(ValidationError) as error:
        Settings(**{field: value})
    assert [e["loc"][0] for e in error.value.errors()] == [field]


def test_a_case_with_an_infinite_setting_is_refused_with_its_location(project, capsys):
    case = project / "regression" / "triage.yaml"
    case.write_text(case.read_text().replace("budget: 1200\n", "budget: 1200\nsettings: {phrase_weight: .inf}\n", 1))
    code, out, err = cli(["run", "regression/triage.yaml", "--pipeline", "bm25"], capsys)
    assert code == 2 and out == ""
    assert len(err) == 1 and "triage.yaml" in err[0] and "settings.phrase_weight" in err[0] and "finite" in err[0]


ITEM = dict(id="a", kind="note", fidelity="summary", labels=[], why=[], text="t")


def test_packet_items_and_trace_events_refuse_non_finite_numbers():
    with pytest.raises(ValidationError, match="finite"):
        PacketItem(score=float("nan"), **ITEM)
    packet = Packet(decision="retrieve", reason="r", items=[PacketItem(score=1.0, **ITEM)],
                    budget={"limit": 10, "used": 1})
    base = dict(story="s", query="q", as_of="2030-01-01", budget=10, pipeline="bm25", packet=packet)
    assert TraceEvent(stages={"candidates": [{"id": "a", "scores": {"bm25": 1.0}}]}, **base)
    with pytest.raises(ValidationError, match=r"candidates\[0\]\.scores\.bm25 is nan"):
        TraceEvent(stages={"candidates": [{"id": "a", "scores": {"bm25": float("nan")}}]}, **base)
    with pytest.raises(ValidationError, match="finite"):
        TraceEvent(timings_ms={"retrieve": float("inf")}, **base)


def test_print_json_refuses_nan_rather_than_printing_invalid_json(capsys):
    with pytest.raises(GardenError) as error:
        print_json({"score": float("nan")})
    assert len(error.value.messages) == 1 and "--json" in error.value.messages[0]
    assert capsys.readouterr().out == ""


def test_a_command_whose_json_would_hold_nan_exits_2_with_one_line(project, capsys, monkeypatch):
    import garden.pipelines

    monkeypatch.setattr(garden.pipelines, "describe_pipelines", lambda: {"bm25": float("nan")})
    code, out, err = cli(["pipelines", "--json"], capsys)
    assert code == 2 and out == "" and len(err) == 1 and "JSON" in err[0]
