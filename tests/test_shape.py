"""The question's shape, read from its text alone (garden/rerank/shape.py), on fictional
questions: each rule fires on what it names and not on a pinpoint question that shares a
word with it."""
from __future__ import annotations

import datetime as dt

import pytest

from garden.rerank.shape import GATHERING, PINPOINT, shape_of

GATHERING_QUESTIONS = [
    ("Which cafés have both of them visited?", "quantifier"),
    ("Has Teodor mentioned all of his boats?", "quantifier"),
    ("What did Odile bring each Saturday?", "quantifier"),
    ("What does Ida order every time she visits the harbour?", "quantifier"),
    ("How many times has Teodor sailed to the lighthouse?", "count"),
    ("How often does Odile swim in the bay?", "count"),
    ("What is the total Odile spent on paint?", "count"),
    ("How many days passed between the regatta and the storm?", "interval"),
    ("How long after the storm did Teodor repair the jetty?", "interval"),
    ("Did Odile buy the boat before or after the storm?", "order"),
    ("Which came first, the regatta or the fair?", "order"),
    ("Who has sailed more than Teodor this year?", "comparison"),
    ("What do the two gardens have in common?", "comparison"),
    ("Is the new boat faster than the old one?", "comparison"),
    ("What do Odile and Teodor like to cook?", "pair"),
    ("Which dishes has Odile cooked with fennel?", "plural"),
    ("What books has Ida read this winter?", "plural"),
    ("What kinds of fish has Teodor caught?", "plural"),
    ("What are Ida's favourite films?", "plural"),
]

PINPOINT_QUESTIONS = [
    "What name did Odile give her boat?",
    "When did Teodor repaint the shed?",
    "Where does Ida keep her bicycle?",
    "What did Odile repaint on 16 May 2031?",
    "Who fixed the jetty?",
    "Did Odile like the soup at all?",
    "What colour is Teodor's boat?",
    "Why did Odile leave the regatta early?",
    "What is Ida's address?",
    "Which boat did Teodor buy?",
    "Odile and the harbour master argued about what?",
]


@pytest.mark.parametrize("question,rule", GATHERING_QUESTIONS)
def test_a_gathering_question_is_read_as_gathering_by_its_rule(question, rule):
    shape = shape_of(question)
    assert shape.kind == GATHERING, shape.explained()
    assert rule in dict(shape.cues), shape.explained()


@pytest.mark.parametrize("question", PINPOINT_QUESTIONS)
def test_a_pinpoint_question_fires_no_rule(question):
    shape = shape_of(question)
    assert shape.kind == PINPOINT, shape.explained()
    assert shape.cues == ()


def test_the_explanation_names_each_rule_and_the_words_that_fired_it():
    shape = shape_of("How many days passed between the regatta and the storm?")
    text = shape.explained()
    assert text.startswith("gathering: ")
    assert "count (how many)" not in text    # "how many days" is an interval, counted by its own rule
    assert "interval (how long ... between)" in text
    assert shape_of("Who fixed the jetty?").explained().startswith("pinpoint")


def test_the_shape_reads_the_text_alone_whatever_its_case_and_apostrophes():
    assert shape_of("WHAT BOOKS HAS IDA READ?").kind == GATHERING
    assert shape_of("What are Ida’s favourite films?").kind == GATHERING
    assert shape_of("").kind == PINPOINT


def test_the_stage_arms_the_shape_and_traces_its_cues(tmp_path):
    from garden.formats.stories import load_story
    from garden.pipelines import make_pipeline
    from garden.rerank.query import QuerySpec

    story = load_story("fixtures/merrowby-messages.yaml")
    pipeline = make_pipeline("default")
    outcome = pipeline.run(QuerySpec(story, "Which dishes has Odile cooked with fennel?", dt.date(2031, 6, 1)))
    assert outcome.trace["shape"]["shape"] == GATHERING
    assert ["plural", "which dishes"] in outcome.trace["shape"]["cues"]
    outcome = pipeline.run(QuerySpec(story, "What name did Odile give her boat?", dt.date(2031, 6, 1)))
    assert outcome.trace["shape"] == {"shape": PINPOINT, "cues": []}


@pytest.mark.parametrize("question,parts", [
    ("How many days passed between the regatta and the storm?", ("the regatta", "the storm")),
    ("Did Odile buy the boat before or after the storm?", ("Odile buy the boat", "the storm")),
    ("How long after the storm did Teodor repair the jetty?", ("the storm", "Teodor repair the jetty")),
    ("Which town have both Odile and Teodor visited?",
     ("Which town have Odile visited", "Which town have Teodor visited")),
    ("Which dishes has Odile cooked with fennel?", ()),
    ("What name did Odile give her boat?", ()),
])
def test_the_facets_are_the_parts_a_question_asks_of_separately(question, parts):
    from garden.rerank.shape import facets

    assert facets(question) == parts
