"""The sessions stage (garden/rerank/sessions.py) and the store's own voice unasked
(garden/rerank/addressee.py): a session that matches as a whole, then its turns; and the
assistant's words counting less when the question asks about the user."""
from __future__ import annotations

import pytest

from garden.formats.stories import load_story
from garden.rerank.sessions import SESSION_K, session_ranks, sessions
from garden.rerank.stages import SETTING_DEFAULTS
from kiln_lane import FIXTURES, ask

RENT = "What did I say about the studio rent?"


@pytest.fixture(scope="module")
def story():
    return load_story(FIXTURES / "kiln-lane.yaml")


def test_a_session_is_a_run_of_turns_sharing_a_date_and_title(story):
    numbers = sessions(story)
    by_title: dict[tuple, set[int]] = {}
    for record in story.records:
        if record.id in numbers:
            by_title.setdefault((record.at, record.title), set()).add(numbers[record.id])
    assert all(len(n) == 1 for n in by_title.values())             # one number a sitting
    assert len({n for ns in by_title.values() for n in ns}) == len(by_title)   # a number per sitting
    assert all(story.by_id[rid].kind in ("source", "chunk") for rid in numbers)


def test_sessions_rank_by_their_best_cosines_ties_by_story_order():
    ranks = session_ranks({1: [0.2, 0.1], 2: [0.5], 3: [0.3, 0.2, 0.1, 0.9], 4: [0.3]})
    assert ranks == {3: 1, 2: 2, 1: 3, 4: 4}          # 3 sums its best three: 1.4; 1 and 4 tie at 0.3
    assert session_ranks({}) == {}


def test_turns_of_a_later_ranked_session_fall_by_their_sessions_reciprocal_rank(story):
    with_stage = ask(RENT, "default", story, standout=1)
    without = ask(RENT, "default-sessions", story, standout=1)
    after = {c["id"]: c["score"] for c in with_stage.stages["candidates"]}
    before = {c["id"]: c["score"] for c in without.stages["candidates"]}
    numbers = sessions(story)
    factors = {rid: after[rid] / before[rid] for rid in after if rid in before and before[rid] > 0 and rid in numbers}
    assert factors and max(factors.values()) == pytest.approx(1.0)      # the first session's turns keep theirs
    weight = SETTING_DEFAULTS["session_weight"]
    allowed = [((SESSION_K + 1) / (SESSION_K + r)) ** weight for r in range(1, 20)]
    for rid, factor in factors.items():   # every turn's factor is one session rank's
        assert min(abs(factor - a) for a in allowed) < 1e-4, (rid, factor)   # the trace rounds to 6 places
    same = {numbers[rid] for rid, f in factors.items() if f == pytest.approx(1.0)}
    assert len(same) == 1                                                # one session is first


def test_without_a_semantic_member_nothing_moves(story):
    plain = ask(RENT, "default@bm25s", story, standout=1)
    removed = ask(RENT, "default-sessions@bm25s", story, standout=1)
    assert [(i.id, i.score) for i in plain.packet.items] == [(i.id, i.score) for i in removed.packet.items]


def test_unasked_the_assistants_words_count_less_and_lend_nothing(story):
    asked_of_user = "What glaze is on the breakfast mugs?"
    full = ask(asked_of_user, "default-sessions", story, standout=1)
    even = ask(asked_of_user, "default-sessions", story, standout=1, unasked=1.0)
    score = {c["id"]: c["score"] for c in full.stages["candidates"]}
    plain = {c["id"]: c["score"] for c in even.stages["candidates"]}
    assistant = [rid for rid in score if story.by_id[rid].speaker == "assistant" and plain.get(rid, 0) > 0]
    assert assistant
    for rid in assistant:   # its own match, scaled; nothing lent to it by the user's turns beside it
        assert score[rid] <= SETTING_DEFAULTS["unasked"] * plain[rid] + 1e-5   # the trace rounds to 6 places
    assert full.stages["addressee"]["lowered"] == len([rid for rid in assistant if rid in score])
    # asked what the assistant said, its words are lifted, not lowered
    asked = ask("What glaze did you suggest for the breakfast mugs?", "default", story, standout=1)
    assert "lowered" not in asked.stages["addressee"] and "s2.4" in asked.stages["addressee"]["lifted"]
