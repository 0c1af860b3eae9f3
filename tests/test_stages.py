"""The structured pipeline as named stages: ablation by name, settings a pipeline uses, the
ablate command and API, and adding a stage as one class plus one line."""
from __future__ import annotations

import ast
import datetime as dt
import json
import re
import typing
from typing import Any
from pathlib import Path

import pytest

import garden
from garden.cli import main
from garden.errors import GardenError
from garden.formats.stories import load_story
from garden.rerank.stages import SETTING_DEFAULTS, Resolved, Settings
from garden.pipelines import check_pipeline, check_settings, make_pipeline, split_structured
from garden.pipelines.structured import STAGES, StructuredPipeline
from garden.rerank.context import StageBase
from garden.rerank.query import QuerySpec
from stage_list import listed_stages

ROOT = Path(__file__).resolve().parents[1]
STORY = load_story(ROOT / "fixtures" / "aurora-ridge.yaml")
PHRASE_QUERY = "remember our glacier custard incident?"


def run_cli(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_pipeline_is_the_list_of_stages_in_order():
    """The order is the list's (stage_list reads it from the source); what is pinned here is
    that the pipeline runs it as written, that the list holds the stages every packet needs,
    and that an ablation removes exactly the stages it names."""
    listed = listed_stages()
    assert [s.name for s in STAGES] == listed
    assert len(listed) == len(set(listed)) and {"triage", "retrieve", "lanes", "pack", "premise"} <= set(listed)
    assert listed.index("retrieve") < listed.index("lanes") < listed.index("pack")
    assert {s.name for s in STAGES if s.essential} == {"retrieve", "lanes", "pack"}
    assert [s.name for s in make_pipeline("default-phrase-session").stages] == [
        n for n in listed if n not in ("phrase", "session")]


def test_every_setting_has_one_default_and_one_stage_that_uses_it():
    assert set(SETTING_DEFAULTS) == set(Settings.model_fields) == set(Resolved.__dataclass_fields__)
    used = [u for s in STAGES for u in s.uses]
    assert sorted(used) == sorted(SETTING_DEFAULTS), "each setting read by exactly one stage"
    assert Settings().resolved() == Resolved(**SETTING_DEFAULTS)
    assert Settings(topic=0.9).resolved().topic == 0.9


@pytest.mark.parametrize("name, needle", [
    ("default-nothing", "no stage named 'nothing'"),
    ("default-retrieve", "the retrieve stage is essential"),
    ("default-pack", "the pack stage is essential"),
])
def test_a_bad_ablation_name_is_one_line(name, needle):
    with pytest.raises(GardenError, match=needle):
        check_pipeline(name)


def test_split_structured_reads_only_structured_names():
    # a name without settings has none; what it meant before settings could be named, it means
    assert split_structured("default") == ("default", frozenset(), "hybrid", ())
    assert split_structured("default-phrase-standout") == ("default", frozenset({"phrase", "standout"}), "hybrid", ())
    assert split_structured("default-phrase@milvus-hybrid:uri=http://127.0.0.1:19530") == (
        "default", frozenset({"phrase"}), "milvus-hybrid:uri=http://127.0.0.1:19530", ())
    assert split_structured("bm25:k1=1.2") is None
    assert split_structured("my-plugin") is None


def test_the_stages_stand_on_any_base_retriever_named_after_an_at():
    spec = QuerySpec(STORY, PHRASE_QUERY, dt.date(2030, 1, 12))
    assert make_pipeline("default@hybrid").run(spec).packet == make_pipeline("default").run(spec).packet
    on_bm25s = make_pipeline("default-session@bm25s").run(spec)
    assert make_pipeline("default-session@bm25s").retriever_name == "bm25s"
    assert any("phrase_match" in item.labels for item in on_bm25s.packet.items)
    assert all("bm25s" in item.why for item in on_bm25s.packet.items if "retrieved" in item.why)
    for name, needle in [("default@nope", "no base retriever named 'nope'"),
                         ("default@bm25:k1=-1", "option k1 must be"),
                         ("default-zzz@bm25", "no stage named 'zzz'")]:
        with pytest.raises(GardenError, match=needle):
            check_pipeline(name)


def test_removing_a_stage_removes_its_effect():
    spec = QuerySpec(STORY, PHRASE_QUERY, dt.date(2030, 1, 12))
    full = make_pipeline("default").run(spec).packet
    without = make_pipeline("default-phrase").run(spec).packet
    assert any("phrase_match" in item.labels for item in full.items)
    assert not any("phrase_match" in item.labels for item in without.items)
    ask = QuerySpec(STORY, "What did the captain decide?", dt.date(2030, 1, 12))
    assert make_pipeline("default").run(ask).packet.decision == "ask"
    assert make_pipeline("default-triage").run(ask).packet.decision == "retrieve"


def test_a_setting_the_pipeline_does_not_use_is_refused():
    check_settings("default", Settings(standout=2.0))
    with pytest.raises(GardenError, match="pipeline bm25 has no stage that uses 'standout'"):
        check_settings("bm25", Settings(standout=2.0))
    with pytest.raises(GardenError, match="pipeline default-phrase has no stage that uses 'phrase_weight'"):
        check_settings("default-phrase", Settings(phrase_weight=2.0))


def test_the_command_line_refuses_standout_on_a_bare_pipeline(project, capsys):
    code, out, err = run_cli(["query", "aurora-ridge", "gaming", "--pipeline", "bm25", "--standout", "2"], capsys)
    assert code == 2 and out == ""
    assert "has no stage that uses 'standout'" in err and len(err.strip().splitlines()) == 1


def test_an_ablated_pipeline_runs_wherever_a_pipeline_name_goes(project, capsys):
    code, out, _ = run_cli(["query", "aurora-ridge", PHRASE_QUERY, "--pipeline", "default-phrase", "--json"], capsys)
    assert code == 0 and json.loads(out)["decision"] == "retrieve"
    code, out, _ = run_cli(["run", "regression/named-phrase.yaml", "--pipeline", "default-phrase", "--json"], capsys)
    assert code == 1 and json.loads(out)["results"][0]["passed"] is False, "phrase decides the named-phrase case"
    code, out, _ = run_cli(["pipelines", "--json"], capsys)
    assert "default-STAGE" in json.loads(out)["default"]


def test_ablate_reports_the_cases_each_stage_decides(project, capsys):
    picked = project / "picked"
    picked.mkdir()
    for name in ("named-phrase", "door-provenance"):
        (project / "regression" / f"{name}.yaml").rename(picked / f"{name}.yaml")
    code, out, err = run_cli(["ablate", "picked", "--stages", "phrase,provenance", "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["judgments"] == "each case's expectations"
    assert data["stages"]["phrase"]["decides"] == ["named-phrase"]
    assert data["stages"]["provenance"]["decides"] == ["door-provenance"]
    assert data["stages"]["phrase"]["metrics"]["AP"]["delta"] >= 0


def test_ablate_through_the_api_is_a_table(project):
    table = garden.ablate("regression/named-phrase.yaml", stages="phrase")
    assert list(table.index) == ["phrase"]
    assert table.loc["phrase", "decides"] == ["named-phrase"]
    assert table.attrs["report"]["full"] == "default"


def test_adding_a_stage_is_one_class_and_one_line():
    class Silence(StageBase, name="silence"):
        """Stops every query: the smallest stage that changes an answer."""

        def run(self, ctx) -> None:
            ctx.stop("skip", "the silence stage answers nothing")

    pipeline = StructuredPipeline()
    pipeline.stages = [*STAGES[:1], Silence(), *STAGES[1:]]  # the one line, here in a list of our own
    packet = pipeline.run(QuerySpec(STORY, PHRASE_QUERY, dt.date(2030, 1, 12))).packet
    assert (packet.decision, packet.items) == ("skip", [])
    assert Silence.uses == () and Silence.essential is False
    # undeclared, its line in the diagram is its title's words, here its name; the explorer
    # draws its step as what it changed, under its name in the trace
    assert Silence.title == Silence.drawn == "Silence"
    assert (Silence.step, Silence.shown_with, Silence.armed, Silence.traced) == ("changes", None, "", "silence")
    with pytest.raises(TypeError, match="step must be one of changes, decision"):
        class Drawn(StageBase, name="drawn", step="chart"):
            pass


def test_the_diagram_draws_each_stage_as_it_declares_itself():
    from garden.rerank.stages import diagram

    drawn = diagram()
    rows = drawn.splitlines()
    assert rows[0] == "query + as_of + hints + session"
    assert rows[-1].startswith("  -> packet + trace") and rows[-1].endswith("garden/pipelines/traces.py")
    # each stage: its name, its words wrapped under one another, its module at the row's end
    said: dict[str, list[str]] = {}
    for row in rows[1:-1]:
        if row.startswith("  -> "):
            name, words, module = re.fullmatch(r"  -> (\S+) +(.+?) +(garden/\S+\.py)", row).groups()
            said[name] = [words]
            assert module == type(_at(name)).__module__.replace(".", "/") + ".py"
        else:
            said[name].append(row.strip())
    assert list(said) == [s.name for s in STAGES]
    for stage in STAGES:
        assert " ".join(said[stage.name]) == stage.drawn, stage.name
    assert max(len(row) for row in rows) <= 120


def _at(name):
    return next(s for s in STAGES if s.name == name)


def test_a_misordered_stage_list_is_refused_in_one_line():
    """`standout` after `lanes` once ran and silently did nothing: lanes read the cutoff
    before it was armed."""
    order = [s for s in STAGES if s.name != "standout"]
    order.insert(order.index(_at("lanes")) + 1, _at("standout"))
    with pytest.raises(GardenError) as refused:
        StructuredPipeline("mine", stages=order)
    assert str(refused.value) == ("pipeline mine: stage lanes reads lane_rules, which stage standout writes after it; "
                                  "put standout before lanes")


def test_a_stage_twice_or_a_need_unmet_is_refused():
    with pytest.raises(GardenError, match="stage phrase is listed 2 times"):
        StructuredPipeline(stages=[*STAGES, _at("phrase")])
    with pytest.raises(GardenError, match="stage premise needs packed, which no stage before it writes"):
        StructuredPipeline(stages=[_at("premise"), *[s for s in STAGES if s.name != "premise"]])


def test_what_a_ranking_reads_is_the_stages_declared_modes():
    from garden.pipelines.ranking import MOVED_BY, PACKET_STAGES

    assert PACKET_STAGES == {"standout", "calibration", "decide", "fill", "lanes", "provenance", "restated", "passage",
                             "pack", "premise"}
    assert MOVED_BY == ("structure",)
    first_selecting = next(i for i, s in enumerate(STAGES) if s.mode == "selects")
    assert all(s.mode != "selects" for s in STAGES[:first_selecting])
    assert all(s.mode == "selects" for s in STAGES[first_selecting:]), "a ranking stops before the first"


def test_every_label_and_reason_a_stage_gives_is_one_it_declares():
    """The labels and reasons a packet may carry are read off the declarations, so a stage
    that gives one it does not declare would give one no case may expect."""
    import inspect
    import re

    from garden.rerank.stages import LABELS, REASONS
    from garden.rerank.eligibility import ELIGIBILITY_LABELS, ELIGIBILITY_REASONS
    from garden.rerank.stages import PIPELINE_LABELS, PIPELINE_REASONS

    # a stage module's helpers may be run by another stage (window.lift by structure):
    # what the stage modules give, together, is what the stages declare, together
    given_labels, given_reasons = set(), set()
    for stage in STAGES:
        source = inspect.getsource(inspect.getmodule(type(stage)))
        given_labels |= set(re.findall(r'\.label\("([a-z_]+)"', source))
        given_reasons |= set(re.findall(r'\.reject\("([a-z_]+)"', source))
    assert given_labels <= {x for s in STAGES for x in s.labels}
    assert given_reasons <= {x for s in STAGES for x in s.reasons}
    assert set(LABELS) == {x for s in STAGES for x in s.labels} | ELIGIBILITY_LABELS | set(PIPELINE_LABELS)
    assert set(REASONS) == {x for s in STAGES for x in s.reasons} | ELIGIBILITY_REASONS | set(PIPELINE_REASONS)


def test_no_stage_hands_another_a_callback_through_the_context():
    """What a stage writes is data a later stage reads; the provenance stage once left a
    function in the context for the pack stage to call."""
    written: list[tuple[str, str]] = []

    def check(stage, ctx) -> None:
        for field in stage.writes:
            value = getattr(ctx, field)
            if callable(value):
                written.append((stage.name, field))

    spec = QuerySpec(STORY, "Why did we move the observation log to the tablet?", dt.date(2030, 1, 12))
    outcome = StructuredPipeline().run(spec, after=check)
    assert outcome.packet.items and written == []


def _mentions_any(hint) -> bool:
    return hint is Any or any(_mentions_any(arg) for arg in typing.get_args(hint))


def test_every_field_of_the_context_is_typed_but_the_trace():
    """What one stage hands another is a typed field of the context; `Any` is left only
    where `UNTYPED` says why (the trace, which no stage reads to decide)."""
    from garden.rerank.context import UNTYPED, QueryContext

    hints = typing.get_type_hints(QueryContext)
    assert set(hints) == set(QueryContext.__dataclass_fields__)
    untyped = {name for name, hint in hints.items() if _mentions_any(hint)}
    assert untyped == set(UNTYPED), untyped
    assert _mentions_any(dict[str, Any]) and not _mentions_any(dict[str, float])


def _is_context_trace(node) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "trace" and isinstance(node.value, ast.Name) \
        and node.value.id == "ctx"


def _trace_reads(source: str) -> list[int]:
    """The lines that read the query's trace (`ctx.trace[...]` loaded, `ctx.trace.get(...)`)
    rather than write it (an assignment, `setdefault` to fill a stage's own entry)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_context_trace(node.value):
            found.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and \
                _is_context_trace(node.func.value):
            found.append(node.lineno)
    return sorted(found)


def test_no_stage_or_pipeline_reads_the_trace_to_decide():
    """The decide stage's verdict once travelled through `ctx.trace["decide"]` to the lanes,
    the packet's gate and a store's reference; the trace is now a copy for display. The
    explorer draws it (garden/explore), and nothing that runs a query reads it."""
    assert _trace_reads('d = ctx.trace["decide"]\nx = ctx.trace.get("decide")\nctx.trace["w"] = 1\n') == [1, 2]
    readers = {}
    for folder in ("rerank", "pipelines"):
        for path in sorted((ROOT / "garden" / folder).glob("*.py")):
            lines = _trace_reads(path.read_text(encoding="utf-8"))
            if lines:
                readers[str(path.relative_to(ROOT))] = lines
    assert readers == {}


def test_the_verdict_is_the_decide_stages_field_and_the_trace_only_shows_it():
    spec = QuerySpec(STORY, "Why did we move the observation log to the tablet?", dt.date(2030, 1, 12))
    seen = {}

    def keep(stage, ctx) -> None:
        seen["ctx"] = ctx

    outcome = StructuredPipeline().run(spec, after=keep)
    verdict = seen["ctx"].verdict
    assert "verdict" in _at("decide").writes and "verdict" in _at("lanes").reads
    assert outcome.trace["decide"] == verdict.traced()
    gate = outcome.packet.gate
    assert (gate.support, gate.level, gate.threshold, gate.answers) == (verdict.support, verdict.level,
                                                                        verdict.threshold, verdict.answers)

    def poison(stage, ctx) -> None:
        # every stage's trace entry replaced by nonsense as soon as it is written
        for key in ctx.trace:
            if key not in ("stages", "resolution"):
                ctx.trace[key] = {"answers": not verdict.answers, "support": -1e9, "threshold": 1e9}

    poisoned = StructuredPipeline().run(spec, after=poison)
    assert poisoned.packet.model_dump() == outcome.packet.model_dump()


def _context_fields_set(source: str) -> set[str]:
    """The context fields a module sets: `ctx.F = ...` (or `ctx.F.x = ...`, `ctx.F[k] = ...`)
    and `ctx.F.append/extend/update/setdefault(...)`."""
    from garden.rerank.context import QueryContext

    fields, found = set(QueryContext.__dataclass_fields__), set()
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("append", "extend", "update", "setdefault"):
            targets = [node.func.value]
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id == "ctx" \
                        and part.attr in fields:
                    found.add(part.attr)
    return found


def test_every_context_field_a_stage_sets_is_one_it_declares_it_writes():
    """What a stage hands on is declared in its `writes`, so the pipeline can refuse an order
    that would read it before it is written; the trace, display only, is everyone's."""
    import inspect

    assert _context_fields_set("ctx.verdict = v\nctx.lane_rules.fill = True\nctx.pack_rules.append(r)\n") == {
        "verdict", "lane_rules", "pack_rules"}
    undeclared = {}
    for stage in STAGES:
        written = _context_fields_set(inspect.getsource(inspect.getmodule(type(stage)))) - {"trace"}
        if written - set(stage.writes):
            undeclared[stage.name] = sorted(written - set(stage.writes))
    assert undeclared == {}
