"""Triage: RETRIEVE, ASK or SKIP, each with its reason."""
from __future__ import annotations

import pytest

from garden.models import Story
from garden.rerank.resolve import Resolution, resolve
from garden.rerank.triage import distinctive_words, triage, words


@pytest.fixture
def story() -> Story:
    return Story.model_validate({
        "story": "tiny",
        "project": "tiny",
        "topics": {"gaming": {"aliases": ["games"]}, "observation_log": {"aliases": ["logbook"]}},
        "entities": {"mira": {"aliases": ["mira"]}},
        "records": [{"id": "decision.tablet", "kind": "decision", "text": "t"}],
    })


def decide(story, query):
    return triage(query, resolve(story, query))


@pytest.mark.parametrize("query", [
    "what does custard mean?",
    "What does the word aurora mean",
    "what is the meaning of serendipity?",
    "define glacier",
    "how do you spell thermometer?",
    "translate glacier into French",
    "12 * 7",
    "what is 3 + 4?",
])
def test_self_contained_questions_are_skipped(story, query):
    t = decide(story, query)
    assert t.decision == "skip", t
    assert "self-contained" in t.reason
    assert t.fallback is False and t.question is None


def test_a_definitional_question_with_a_history_marker_is_not_skipped(story):
    t = decide(story, "what did we mean by custard?")
    assert t.decision != "skip"
    t = decide(story, "what does custard mean to us?")
    assert t.decision == "retrieve"
    assert "us" in t.reason


def test_a_definitional_question_about_an_anchor_is_not_skipped(story):
    t = decide(story, "what does gaming mean?")
    assert t.decision == "retrieve"
    assert "topics gaming" in t.reason


def test_history_without_an_anchor_asks_naming_the_missing_anchor(story):
    t = decide(story, "Why did we change it?")
    assert t.decision == "ask"
    assert "did" in t.reason and "we" in t.reason
    assert "missing what 'it' refers to" in t.reason
    assert t.question is not None and "'it'" in t.question
    assert t.fallback is False


def test_history_without_a_pronoun_asks_what_it_is_about(story):
    t = decide(story, "Do you remember?")
    assert t.decision == "ask"
    assert "missing what the question is about" in t.reason
    assert t.question.startswith("What is this about?")


def test_an_anchored_query_is_retrieved_with_its_distinctive_words(story):
    t = decide(story, "Why did we stop logging with the thermometer?")
    assert t.decision == "retrieve"
    assert "distinctive words kept verbatim: stop logging thermometer" in t.reason
    assert t.fallback is False


def test_a_resolved_anchor_is_named_in_the_reason(story):
    t = decide(story, "Why did Mira stop playing games?")
    assert t.decision == "retrieve"
    assert "topics gaming" in t.reason
    assert "entities mira" in t.reason
    t = decide(story, "why did we pick decision.tablet?")
    assert "records decision.tablet" in t.reason


def test_a_history_marker_with_an_anchor_retrieves(story):
    t = decide(story, "Why did we change it in the logbook?")
    assert t.decision == "retrieve"
    assert t.reason.startswith("history marker (")


def test_an_anchored_query_without_markers_retrieves(story):
    t = decide(story, "mira games")
    assert t.decision == "retrieve"
    assert t.reason.startswith("anchored query")
    assert t.fallback is False


def test_fallback_is_flagged_when_no_rule_decides(story):
    t = decide(story, "glacier custard incident")
    assert t.decision == "retrieve"
    assert t.fallback is True
    assert "no triage rule decided" in t.reason
    assert "glacier custard incident" in t.reason


def test_fallback_with_nothing_at_all(story):
    t = triage("   ", Resolution())
    assert t.decision == "retrieve" and t.fallback is True
    assert t.reason == "no triage rule decided; defaulted to retrieve"


def test_chinese_history_markers_ask_when_unanchored(story):
    t = decide(story, "我们上次说的那个呢？")
    assert t.decision == "ask"
    assert "我们" in t.reason and "上次" in t.reason


def test_chinese_history_marker_with_a_latin_anchor_retrieves(story):
    t = decide(story, "还记得 glacier custard 吗")
    assert t.decision == "retrieve"
    assert t.fallback is False
    assert "记得" in t.reason
    assert "glacier custard" in t.reason


def test_chinese_marker_blocks_the_skip(story):
    t = decide(story, "what does custard mean 我们")
    assert t.decision == "retrieve"


def test_words_and_distinctive_words():
    assert words("Why did we change it?") == ["why", "did", "we", "change", "it"]
    assert distinctive_words("Why did we change it?") == []
    assert distinctive_words("Remember the glacier custard incident last winter?") == [
        "glacier", "custard", "incident", "winter"]


def test_an_ambiguous_head_with_nothing_else_is_asked_about():
    res = Resolution(ambiguous={"captain": ["observatory_captain", "ship_captain"]})
    t = triage("What did the captain decide?", res)
    assert t.decision == "ask"
    assert t.question == "Which captain do you mean: observatory captain or ship captain?"


def test_an_ambiguous_head_beside_a_resolved_topic_is_retrieved():
    res = Resolution(topics={"night_watch": 1.0}, topic_why={"night_watch": "x"},
                     ambiguous={"captain": ["observatory_captain", "ship_captain"]})
    assert triage("What did the captain decide about the night watch?", res).decision == "retrieve"
