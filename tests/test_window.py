"""The window stage (garden/rerank/window.py): the time a query names, counted back from its
own `as_of`, and the lift of what is dated inside it."""
from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, strategies as st

from garden.rerank.window import named_window
from kiln_lane import AS_OF, ask

D = dt.date


@pytest.mark.parametrize("query, start, end", [
    ("What did I buy yesterday?", D(2032, 3, 28), D(2032, 3, 28)),
    ("What did I cook 3 days ago?", D(2032, 3, 25), D(2032, 3, 27)),
    ("What did I repot two weeks ago?", D(2032, 3, 12), D(2032, 3, 18)),
    ("Where did I go a week ago?", D(2032, 3, 19), D(2032, 3, 25)),
    ("What did I read a couple of weeks ago?", D(2032, 3, 12), D(2032, 3, 18)),
    ("What did I plant a few months ago?", D(2031, 12, 15), D(2032, 1, 14)),
    ("Who did I meet last week?", D(2032, 3, 19), D(2032, 3, 25)),
    ("What did I bake last weekend?", D(2032, 3, 26), D(2032, 3, 29)),
    ("What did I pay last month?", D(2032, 2, 1), D(2032, 2, 29)),       # a leap year's February
    ("WHAT DID I FIRE TWO  WEEKS AGO?", D(2032, 3, 12), D(2032, 3, 18)),
])
def test_each_expression_names_its_window(query, start, end):
    window = named_window(query, AS_OF)
    assert (window.start, window.end) == (start, end)
    assert window.said in query


@pytest.mark.parametrize("query", [
    "What did I repot recently?", "Where did I move from 4 years ago?", "What did I see last year?",
    "What did I plant last summer?", "What did I repot on 15 March?", "What is a week?",
    "What happened 999 days ago?", "What did I do ago two weeks?",
])
def test_what_names_no_window(query):
    assert named_window(query, AS_OF) is None


def test_the_first_time_named_wins_and_a_window_never_passes_as_of():
    window = named_window("What did I do yesterday, and two weeks ago?", AS_OF)
    assert window.said == "yesterday"
    assert named_window("What did I do 1 day ago?", AS_OF).end <= AS_OF
    january = named_window("What did I pay last month?", D(2032, 1, 10))
    assert (january.start, january.end) == (D(2031, 12, 1), D(2031, 12, 31))


@given(st.dates(min_value=D(1900, 1, 1), max_value=D(2999, 12, 31)), st.integers(1, 400),
       st.sampled_from(["day", "days", "week", "weeks", "month", "months"]))
def test_a_window_lies_before_its_as_of_and_around_its_day(as_of, n, unit):
    window = named_window(f"what did I do {n} {unit} ago", as_of)
    days = n * {"d": 1, "w": 7, "m": 30}[unit[0]]
    if days > 366:
        assert window is None
        return
    assert window.start <= window.end <= as_of
    assert window.start <= as_of - dt.timedelta(days=days) <= window.end


def _run(query: str, pipeline: str = "default"):
    return ask(query, pipeline)


def test_the_stage_takes_the_time_words_out_and_lifts_what_is_dated_inside():
    outcome = _run("What did I repot into a new planter two weeks ago?")
    window = outcome.stages["window"]
    assert window["said"] == "two weeks ago"
    assert (window["start"], window["end"]) == ("2032-03-12", "2032-03-18")
    assert window["lifted"] == ["s2.1"]       # retrieval found it; its neighbour s2.2 comes later, by context
    items = {i.id: i for i in outcome.packet.items}
    assert outcome.packet.items[0].id == "s2.1"
    assert any("two weeks ago" in w for w in items["s2.1"].why)
    assert not any("two weeks ago" in w for w in items["s1.1"].why)


def test_without_the_stage_the_better_worded_turn_leads():
    assert _run("What did I repot into a new planter two weeks ago?", "default-window").packet.items[0].id == "s1.1"


def test_the_lift_is_the_setting():
    scores = {}
    for lift in (0.0, 0.5, 1.0):
        outcome = ask("What did I repot into a new planter two weeks ago?", window=lift, standout=1)
        scores[lift] = {i.id: i.score for i in outcome.packet.items}
    # the lift multiplies the score s2.1 has when the structure stage runs (the phrase
    # credit comes after it), so the final score grows in equal steps with the setting
    step = scores[0.5]["s2.1"] - scores[0.0]["s2.1"]
    # items round to 6 places
    assert step > 0.1 and scores[1.0]["s2.1"] - scores[0.5]["s2.1"] == pytest.approx(step, abs=1e-5)
    assert scores[1.0]["s1.1"] == pytest.approx(scores[0.0]["s1.1"])    # dated outside: untouched
