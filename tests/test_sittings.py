"""The sittings as results (garden/rerank/sittings.py): each sitting's score made again here
from its parts on the Kiln Lane chats, the bare retrievers' one rule, ties in the story's
order, what a record citing turns stands in, the hard rules, a silent packet, and
`garden query --level session` at 80 columns."""
from __future__ import annotations

import datetime as dt

import pytest

from garden.cli import main
from garden.formats.stories import load_story
from garden.models import Story
from garden.pipelines import make_pipeline
from garden.rerank.query import QuerySpec
from garden.rerank.sessions import sessions
from garden.rerank.sittings import SITTING_TOP, SITTINGS_SHOWN, best, ranked, sitting_records, standing
from garden.rerank.stages import SETTING_DEFAULTS, Settings
from garden.rerank.window import named_window
from garden.retrievers import as_retriever
from kiln_lane import AS_OF, STORY, ask

REPOTTED = "What did I repot into a new planter two weeks ago?"   # names a window: 15 March (time-window)
TOLERANCE = 1e-5                                # a score made here against the stage's, rounded to 6 places


@pytest.fixture(scope="module")
def story():
    return load_story(STORY)


def _cosines(story: Story, query: str) -> dict[str, float]:
    dense = as_retriever(make_pipeline("dense").indexes.retriever(story, "dense"))
    return {rid: float(dense.score(query).get(rid, 0.0)) for rid in sessions(story)}


@pytest.mark.parametrize("query", [REPOTTED, "What did I say about the studio rent?"])
def test_a_sittings_score_is_its_best_records_its_turns_as_a_whole_and_its_date(story, query):
    got = make_pipeline("default").ranking(QuerySpec(story, query, AS_OF, settings=Settings(candidates=50)), 50)
    live = {rid: c.score for rid, c in got.candidates.items() if c.reason is None and c.score > 0}
    session_of, members = sessions(story), sitting_records(story)
    cosines, window = _cosines(story, query), named_window(query, AS_OF)
    expected = {}
    for number, ids in members.items():
        held = sorted((live[rid] for rid in ids if rid in live), reverse=True)
        if not held:
            continue
        heard = [cosines[rid] for rid in ids if story.by_id[rid].speaker != story.addressee]
        score = sum(held[:SITTING_TOP]) + SETTING_DEFAULTS["sitting_whole"] * sum(heard) / len(heard)
        if window is not None and window.holds(story.by_id[ids[0]].at):
            score *= 1 + SETTING_DEFAULTS["sitting_dated"]
        expected[number] = score
    assert [s.sitting for s in got.sittings] == sorted(expected, key=lambda n: (-expected[n], n))
    for s in got.sittings:
        assert s.score == pytest.approx(expected[s.sitting], abs=TOLERANCE)
        assert s.rank == got.sittings.index(s) + 1
        assert all(session_of[rid] == s.sitting for rid in s.carried_by) and len(s.carried_by) <= SITTING_TOP
    if query == REPOTTED:   # the window names 15 March, and its sitting leads with the lift named
        assert got.sittings[0].at == dt.date(2032, 3, 15) and "two weeks ago" in got.sittings[0].why[-1]


def test_a_bare_retriever_ranks_a_sitting_by_its_best_record(story):
    query = "What did I say about the studio rent?"
    packet = make_pipeline("bm25s").run(QuerySpec(story, query, AS_OF)).packet
    scores = as_retriever(make_pipeline("bm25s").indexes.retriever(story, "bm25s")).score(query)
    members = sitting_records(story)
    assert packet.sittings
    for s in packet.sittings:
        top = max(float(scores.get(rid, 0.0)) for rid in members[s.sitting])
        assert s.score == pytest.approx(top, abs=TOLERANCE)
        assert "bm25s" in s.why[0] and s.carried_by[0] in members[s.sitting]
    assert [s.score for s in packet.sittings] == sorted((s.score for s in packet.sittings), reverse=True)


def _story(records: list[dict]) -> Story:
    return Story.model_validate({"story": "two-sittings", "project": "two-sittings", "records": records})


def _turn(rid: str, day: int, text: str, **more) -> dict:
    return {"id": rid, "kind": "source", "at": f"2031-05-0{day}", "title": f"Chat {day}", "text": text, **more}


def test_ties_go_to_the_story_order_and_a_citing_record_stands_in_each_sitting_it_cites():
    story = _story([_turn("a.1", 1, "one"), _turn("a.2", 1, "two"), _turn("b.1", 2, "three"),
                    {"id": "note.both", "kind": "note", "text": "a summary", "sources": ["a.2", "b.1"]}])
    held = standing(story, [("b.1", 0.5), ("note.both", 0.9), ("a.1", 0.5), ("nothing", 0.0)])
    assert held == {1: [(0.9, "note.both"), (0.5, "a.1")], 2: [(0.9, "note.both"), (0.5, "b.1")]}
    tied = ranked(story, {2: [(0.5, "b.1")], 1: [(0.5, "a.1")]}, best, lambda top: "")
    assert [(s.sitting, s.rank) for s in tied] == [(1, 1), (2, 2)]     # the story's order, not a name
    assert standing(_story([{"id": "n", "kind": "note", "text": "no sittings"}]), [("n", 1.0)]) == {}


def test_what_the_query_may_not_see_moves_no_sitting():
    story = _story([_turn("a.1", 1, "the glaze recipe for celadon", private=True), _turn("a.2", 1, "hello"),
                    _turn("b.1", 2, "a glaze that crazed"), _turn("b.2", 2, "and the kiln")])
    spec = QuerySpec(story, "celadon glaze recipe", dt.date(2031, 6, 1))
    served = make_pipeline("bm25s", hard_rules=True).run(spec).packet
    assert [s.sitting for s in served.sittings] == [2]                 # sitting 1 holds only the private match
    assert {s.sitting for s in make_pipeline("bm25s").run(spec).packet.sittings} == {1, 2}
    structured = make_pipeline("default").ranking(spec, 50).sittings
    assert "a.1" not in {rid for s in structured for rid in s.carried_by}


def test_a_silent_packet_lists_no_sitting(story):
    outcome = ask("What is the boiling point of mercury on Venus?", "default", story)
    assert outcome.packet.decision == "retrieve" and not outcome.packet.items and not outcome.packet.sittings
    answered = ask(REPOTTED, "default", story).packet
    assert answered.items and 0 < len(answered.sittings) <= SITTINGS_SHOWN


def test_query_shows_the_sittings_at_80_columns(project, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["query", "kiln-lane", REPOTTED, "--as-of", str(AS_OF), "--level", "session"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any(line.startswith("sittings under default: 4 sittings") for line in lines)
    assert " 1. sitting 3  score " in out and "carried by: s2.1" in out and "'two weeks ago'" in out
    assert max(len(line) for line in lines) <= 80
    assert main(["query", "kiln-lane", REPOTTED, "--as-of", str(AS_OF), "--json"]) == 0
    packet = __import__("json").loads(capsys.readouterr().out)
    first = packet["sittings"][0]
    assert set(first) == {"sitting", "rank", "score", "title", "at", "carried_by", "why"} and first["rank"] == 1
    with pytest.raises(SystemExit) as refused:
        main(["query", "kiln-lane", REPOTTED, "--level", "sitting"])
    assert refused.value.code == 2 and "--level" in capsys.readouterr().err
