"""`garden explore`: the scene is drawn from what the pipeline really did, for any story,
case or imported conversation, and the page is one self-contained, deterministic file."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from garden.cli import main
from garden.explore import MAX_NODES, build_scene, explore
from garden.explore.page import CSP, scene_json
from garden.pipelines.structured import STAGES

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo"


@pytest.fixture(scope="module")
def named_phrase():
    return build_scene(case=str(ROOT / "regression" / "named-phrase.yaml"), baseline="bm25s")


def step(scene: dict, step_id: str) -> dict:
    (found,) = [s for s in scene["steps"] if s["id"] == step_id]
    return found


def test_the_steps_follow_the_pipeline_order(named_phrase):
    ids = [s["id"] for s in named_phrase["steps"]]
    assert ids[:2] == ["triage", "baseline"] and ids[-1] == "packet" and len(set(ids)) == len(ids)
    order = [s.name for s in STAGES]
    stages = [i for i in ids if i in order]
    assert stages == sorted(stages, key=order.index)
    # standout, decide and fill arm what the lanes apply, provenance what pack follows: drawn with them
    assert "lanes" in ids and "pack" in ids
    assert not {"standout", "decide", "fill", "provenance"} & set(ids)


def test_tokens_alone_put_the_chatty_distractor_first_and_the_phrase_puts_the_anchor_first(named_phrase):
    baseline = step(named_phrase, "baseline")
    assert baseline["ranking"][0]["id"] == "chat.campfire"
    assert "It puts chat.campfire first" in " ".join(baseline["summary"])
    phrase = step(named_phrase, "phrase")
    assert phrase["ranking"][0]["id"] == "log.week12"
    assert {"span": "glacier custard incident", "records": 2, "credited": True, "refused": None} in phrase["spans"]
    why = [w for c in phrase["changes"] if c["id"] == "log.week12" for w in c["why"]]
    assert "holds the rare in-order span 'glacier custard incident'" in why   # the stage's own words


def test_the_decision_the_lanes_and_the_budget_come_from_the_trace(named_phrase):
    from garden.formats.cases import load_case, spec_for
    from garden.formats.stories import load_story
    from garden.pipelines import make_pipeline

    lanes_step = step(named_phrase, "lanes")
    summary = " ".join(lanes_step["summary"])
    assert "The decide stage: the query's support is" in summary and "the store holds an answer" in summary
    assert "The fill stage armed" in summary
    lanes = {lane["lane"]: lane for lane in lanes_step["lanes"]}
    evidence = lanes["evidence"]
    assert evidence["answers"] and evidence["riding"][:2] == ["log.week12", "view.jokes.index"]
    rejected = {c["id"]: c for c in lanes_step["changes"] if c["kind"] == "rejected"}
    assert all(c["text"] == "rank_cut" and "of the query's best" in c["why"][0] for c in rejected.values())
    # the page shows the packet the pipeline itself serves for the case, item by item
    q = load_case(ROOT / "regression" / "named-phrase.yaml").queries[0]
    served = make_pipeline("default").run(spec_for(q, load_story(q.story_path))).packet
    packet = step(named_phrase, "packet")
    assert [i["id"] for i in packet["items"]] == served.ids()
    assert packet["items"][0]["id"] == "log.week12"
    # the chatty distractor the tokens put first rides, if at all, behind the anchor and its view
    assert "chat.campfire" not in served.ids()[:2]
    assert packet["budget"]["limit"] == 1200
    assert packet["budget"]["used"] == sum(i["chars"] for i in packet["budget"]["items"]) == served.budget.used
    assert step(named_phrase, "pack")["budget"] == packet["budget"]


def test_the_controls_are_refused_for_different_reasons_and_all_hold(named_phrase):
    controls = step(named_phrase, "controls")["controls"]
    assert len(controls) == 6 and all(c["passed"] for c in controls)
    rules = {r["rule"] for c in controls for r in c["refusals"]}
    assert {"phrase:in no record", "phrase:in N records above the ceiling of N",
            "phrase:opens with function word X", "triage:skip"} <= rules
    frequency = next(c for c in controls if "camp stove" in c["query"])
    assert re.fullmatch(r"'camp stove': in \d+ records, above the ceiling of 2", frequency["refusals"][0]["text"])


def test_a_case_marks_what_its_expectations_require_and_forbid(named_phrase):
    marks = named_phrase["marks"]
    assert "required: leads the packet" in marks["log.week12"]
    assert "required: behind log.week12" in marks["view.jokes.index"]
    assert "forbidden: labels phrase_match" in marks["chat.campfire"]
    assert named_phrase["case_passed"] is True and named_phrase["case_failures"] == []


def test_the_page_is_self_contained_and_the_same_input_gives_the_same_bytes():
    case = str(ROOT / "regression" / "named-phrase.yaml")
    page = explore(case=case, baseline="bm25s")
    assert page == explore(case=case, baseline="bm25s")
    assert f'content="{CSP}"' in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    block = re.search(r'<script type="application/json" id="scene">\n(.*?)\n</script>', page, re.S).group(1)
    scene = json.loads(block)
    assert scene["case"] == "named-phrase" and scene["nodes"][0]["id"] == "query"


def test_record_text_cannot_close_the_data_block():
    text = scene_json({"text": "</script><script>alert(1)</script><!--"})
    assert "<" not in text and json.loads(text)["text"].startswith("</script>")


@pytest.mark.parametrize("story", sorted(p.stem for p in (ROOT / "fixtures").glob("*.yaml")))
def test_every_shipped_story_explores(story):
    scene = build_scene(str(ROOT / "fixtures" / f"{story}.yaml"), "what did we decide about the night watch?",
                        baseline="bm25s")
    assert scene["steps"][0]["id"] == "triage" and scene["steps"][-1]["id"] == "packet"
    assert len(scene["nodes"]) <= MAX_NODES
    ids = {n["id"] for n in scene["nodes"]}
    assert all(e["from"] in ids and e["to"] in ids for e in scene["edges"])


CASES = sorted(str(p.relative_to(ROOT)) for d in ("regression", "challenge") for p in (ROOT / d).glob("*.yaml"))


@pytest.mark.parametrize("case", CASES)
def test_every_shipped_case_explores(case):
    scene = build_scene(case=str(ROOT / case), baseline="bm25s")
    assert scene["case"] == Path(case).stem
    assert scene["case_passed"] is (not case.startswith("challenge"))
    packet = scene["steps"][-1]
    assert packet["id"] == "packet" and all(n["x"] >= 0 and n["y"] >= 0 for n in scene["nodes"])


@pytest.mark.skipif(not (LOCOMO / "conv-30.json").is_file(), reason=f"the LoCoMo data is not at {LOCOMO}")
def test_an_imported_locomo_conversation_draws_the_neighbourhood_not_the_store(tmp_path, monkeypatch, capsys):
    from garden.formats.locomo import import_locomo

    import_locomo(LOCOMO / "conv-30.json", tmp_path)
    story = tmp_path / "fixtures" / "locomo-30.yaml"
    out = tmp_path / "conv.html"
    code = main(["explore", str(story), "When did Gina lose her job at Door Dash?", "--out", str(out)])
    line = capsys.readouterr().out
    assert code == 0 and line.startswith(f"wrote {out}")
    page = out.read_text(encoding="utf-8")
    scene = json.loads(re.search(r'id="scene">\n(.*?)\n</script>', page, re.S).group(1))
    assert len(scene["nodes"]) <= MAX_NODES
    assert scene["store"]["records"] > 500 and scene["left_out"]["records"] > 400
    assert scene["drawn"]["records"] + scene["left_out"]["records"] == scene["store"]["records"]
    assert scene["drawn"]["people"] == 2                      # the two speakers
    drawn = {n["id"] for n in scene["nodes"]}
    packet = scene["steps"][-1]
    assert all(item["id"] in drawn for item in packet.get("items", []))


@pytest.mark.parametrize("args, needle", [
    (["explore", "nosuch", "q?"], "no story named 'nosuch'"),
    (["explore", "--case", "nosuch"], "no case named 'nosuch'"),
    (["explore", "aurora-ridge", "q?", "--pipeline", "nosuch"], "unknown pipeline 'nosuch'"),
    (["explore", "aurora-ridge", "q?", "--pipeline", "default-nosuch"], "no stage named 'nosuch'"),
    (["explore", "aurora-ridge", "q?", "--pipeline", "bm25"], "a bare retriever goes in --baseline"),
    (["explore", "aurora-ridge", "q?", "--baseline", "nosuch"], "unknown pipeline 'nosuch'"),
    (["explore", "aurora-ridge", "q?", "--case", "named-phrase"], "not both"),
    (["explore"], "give STORY and QUERY, or --case CASE"),
    (["explore", "aurora-ridge", "q?", "--out", "no/such/folder/x.html"], "does not exist"),
])
def test_bad_input_is_one_located_line_exit_2(project, capsys, args, needle):
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err, err
    assert not list(project.glob("*.html"))


def test_a_shows_expectation_is_marked_with_the_words_it_requires():
    from garden.explore.scene import expectation_marks
    from garden.formats.cases import Expect

    marks = expectation_marks(Expect(shows={"s4.2": ["a hold of fifteen minutes"]}))
    assert marks == {"s4.2": ["required: its text in the packet shows 'a hold of fifteen minutes'"]}


def test_the_scene_names_no_stage_and_draws_each_as_it_declares():
    """How a stage's step is drawn is what the stage declares (`step`, `shown_with`,
    `armed`, `traced`); garden/explore/scene.py names no stage. A string of it that equals a
    stage's name is a kind of step, a packet's decision or a key of a lane's trace."""
    import ast
    import typing

    from garden.models import Decision
    from garden.rerank.context import STEPS
    from garden.rerank.standout import select_lane

    source = (ROOT / "garden" / "explore" / "scene.py").read_text(encoding="utf-8")
    strings = {node.value for node in ast.walk(ast.parse(source))
               if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    other_meanings = set(STEPS) | set(typing.get_args(Decision)) | set(select_lane("curated", [("a", 1.0)]).trace)
    named = {s.name for s in STAGES} & strings
    assert named <= other_meanings, named - other_meanings
    assert {"decision", "spans", "lanes"} <= {s.step for s in STAGES}, "the kinds the page opens and lists by"
    assert {s.name for s in STAGES if s.shown_with} == {"standout", "calibration", "decide", "fill", "provenance"}
