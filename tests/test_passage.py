"""The passage stage (garden/rerank/passage.py) and its part in the pack stage: a long raw
record rides as the window of its sentences that holds the most of the query's weighted
terms, pointing at the whole record. The choice is checked against a brute-force
reference over every window; the packing on a fictional story ranked by bm25s alone (no
model loaded), each behaviour beside the same pipeline without the stage."""
from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings, strategies as st

from garden.analyzer import analyze
from garden.models import Passage, Story
from garden.pipelines import make_pipeline
from garden.pipelines.structured import StructuredPipeline
from garden.rerank.passage import best_passage, passage, units
from garden.rerank.query import QuerySpec
from garden.rerank.stages import STAGES, Settings

DAY = dt.date(2032, 4, 2)
FIRING = ("Here is the plan for the new kiln. First, dry the pots for two full days. "
          "Candle overnight at a low heat so no steam is trapped. "
          "Ramp slowly to cone 04 for the bisque. "
          "For the celadon, fire to cone 6 and hold ten minutes at peak. "
          "Cool slowly with the damper shut. "
          "Finally, keep a log of every firing so the next one is easier.")


# --- the choice --------------------------------------------------------------------------


def test_units_are_sentences_and_lines_trimmed_and_never_longer_than_the_window():
    text = 'Ask first. Then "fire it!" (gently.)\n- a list item\n\nA very long sentence with many words in it'
    spans = units(text, 20)
    assert [text[a:b] for a, b in spans] == ["Ask first.", 'Then "fire it!"', "(gently.)", "- a list item",
                                            "A very long sentence", "with many words in", "it"]
    assert units("x" * 50, 20) == [(0, 20), (20, 40), (40, 50)]   # a word past the window, cut at it
    listed = "Try these:\n1. By Chloe. Vegan burgers.\n2. Next stop, room 101. Done."
    assert [listed[a:b] for a, b in units(listed, 80)] == [
        "Try these:", "1. By Chloe.", "Vegan burgers.", "2. Next stop, room 101.", "Done."]


def test_the_window_holding_the_rarer_term_wins_and_opens_on_its_sentence():
    weights = {"celadon": 3.0, "cone": 1.0, "kiln": 0.5}
    start, end, score = passage(FIRING, weights, 80)
    chosen = FIRING[start:end]
    assert chosen.startswith("For the celadon, fire to cone 6") and len(chosen) <= 80
    assert score == pytest.approx(4.0)   # celadon and cone, each once
    # the common word alone points elsewhere: the opening sentence holds it
    assert FIRING[slice(*passage(FIRING, {"kiln": 0.5}, 80)[:2])].startswith("Here is the plan for the new kiln.")


def test_a_window_that_reaches_the_end_takes_earlier_sentences_back():
    start, end, _ = passage(FIRING, {"log": 2.0}, 120)
    assert end == len(FIRING) and FIRING[start:end].startswith("Cool slowly")
    assert end - start <= 120 and end - start + len("Ramp slowly to cone 04 for the bisque. ") > 120


def test_no_query_term_gives_the_opening_and_a_text_that_fits_rides_whole():
    start, end, score = passage(FIRING, {"dragon": 4.0}, 80)
    assert (start, score) == (0, 0.0)
    assert FIRING[start:end] == "Here is the plan for the new kiln. First, dry the pots for two full days."
    assert passage("Short turn about the kiln.", {"kiln": 1.0}, 80) == (0, 26, 1.0)


def test_a_bad_window_or_weight_is_refused_in_one_line():
    with pytest.raises(ValueError, match="whole number of characters"):
        passage(FIRING, {"kiln": 1.0}, 0)
    with pytest.raises(ValueError, match="term 'kiln'.*finite"):
        passage(FIRING, {"kiln": float("nan")}, 80)


def _reference(text: str, weights: dict[str, float], limit: int) -> float:
    """The best score any window of whole units fitting `limit` reaches: every window tried."""
    spans = units(text, limit)
    best = 0.0
    for i in range(len(spans)):
        for j in range(i + 1, len(spans) + 1):
            if spans[j - 1][1] - spans[i][0] <= limit:
                found = set(analyze(text[spans[i][0]:spans[j - 1][1]]))
                best = max(best, sum(w for t, w in weights.items() if t in found))
    return best


WORDS = ["kiln", "glaze", "cone", "bisque", "clay", "wheel", "mug", "fire", "slow", "the", "and"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=9), min_size=1, max_size=12),
       st.sampled_from([". ", "! ", "\n", "? "]),
       st.dictionaries(st.sampled_from(WORDS[:9]), st.floats(0.1, 5.0), min_size=1, max_size=4),
       st.integers(15, 90))
def test_the_chosen_passage_scores_as_the_best_window_of_a_brute_force_search(sentences, mark, weights, limit):
    text = mark.join(" ".join(s) for s in sentences) + "."
    terms = {t: w for t, w in weights.items() if analyze(t)}
    terms = {analyze(t)[0]: w for t, w in terms.items()}
    start, end, score = best_passage(text, terms, limit)
    spans = units(text, limit)
    if len(text) <= limit:
        assert (start, end) == (0, len(text))
        return
    assert end - start <= limit and start in {a for a, _ in spans} and end in {b for _, b in spans}
    assert score == pytest.approx(_reference(text, terms, limit), abs=1e-9)
    found = set(analyze(text[start:end]))
    assert score == pytest.approx(sum(w for t, w in terms.items() if t in found), abs=1e-9)
    if score == 0:
        assert start == spans[0][0]


# --- packing -----------------------------------------------------------------------------


def studio(*extra: dict) -> Story:
    turn = {"kind": "source", "at": DAY, "title": "Chat 4"}
    return Story.model_validate({"story": "studio", "project": "studio", "records": [
        {"id": "c1", **turn, "speaker": "wren", "text": "Which firing plan would you give me for the celadon mugs?"},
        {"id": "c2", **turn, "speaker": "assistant", "text": FIRING},
        {"id": "c3", **turn, "speaker": "wren", "text": "The celadon test tiles came out pale green."},
        {"id": "c4", **turn, "speaker": "wren", "text": "I sold six mugs at the spring market."},
        *extra,
    ]})


def run(story: Story, query: str, without=frozenset(), budget: int = 200, **given):
    # the cutoff off: the tiny store answers every query, which is not what is tested here
    pipeline = StructuredPipeline("default", "bm25s", frozenset(without) | {"phrase"})
    return pipeline.run(QuerySpec(story, query, DAY, budget, settings=Settings(standout=1, **given)))


def test_the_stage_stands_between_restated_and_pack():
    names = [s.name for s in STAGES]
    assert names.index("restated") < names.index("passage") == names.index("pack") - 1


def test_a_long_turn_rides_as_its_passage_pointing_at_the_whole_record():
    story = studio()
    body = story.by_id["c2"].body
    outcome = run(story, "what hold at peak for the celadon firing?", passage_chars=80, passage_at=80)
    item = next(i for i in outcome.packet.items if i.id == "c2")
    assert item.passage == Passage(start=item.passage.start, end=item.passage.end, length=len(body))
    assert item.text == body[item.passage.start:item.passage.end] and "hold ten minutes at peak" in item.text
    assert "passage" in item.labels and any(f"of {len(body):,}" in w and "c2" in w for w in item.why)
    assert outcome.packet.budget.used == sum(len(i.text) for i in outcome.packet.items) <= 200
    # without the stage the whole turn does not fit, and the packet lacks it
    without = run(story, "what hold at peak for the celadon firing?", {"passage"})
    assert "c2" not in without.packet.ids()
    assert {r.id: r.reason for r in without.packet.rejected}["c2"] == "over_budget"


def test_a_turn_within_the_threshold_rides_whole_and_bare_pipelines_stay_bare():
    story = studio()
    body = story.by_id["c2"].body
    whole = run(story, "what hold at peak for the celadon firing?", budget=1200, passage_chars=80,
                passage_at=len(body))
    item = next(i for i in whole.packet.items if i.id == "c2")
    assert item.passage is None and item.text == body and "passage" not in item.labels
    bare = make_pipeline("bm25s").run(QuerySpec(story, "what hold at peak for the celadon firing?", DAY, 200))
    assert all(i.passage is None for i in bare.packet.items) and "c2" not in bare.packet.ids()


def test_a_record_the_query_names_and_a_note_ride_whole():
    note = {"id": "n1", "kind": "note", "at": DAY, "sources": ["c2"], "text": FIRING.replace("kiln", "new kiln")}
    story = studio(note)
    named = run(story, "show me c2 about the celadon hold", budget=1200, passage_chars=80, passage_at=80)
    assert next(i for i in named.packet.items if i.id == "c2").passage is None
    noted = run(story, "the new kiln celadon hold", {"restated"}, budget=1200, passage_chars=80, passage_at=80)
    assert next(i for i in noted.packet.items if i.id == "n1").passage is None


def test_two_windows_holding_the_same_terms_tie_exactly_in_every_process():
    """A set's order follows the process's string hashing; summed in that order, 0.1, 0.2
    and 0.3 make 0.6 or 0.6000000000000001, and a tie between two windows holding the
    same terms went one way or the other from run to run. Summed exactly, the later wins."""
    import subprocess
    import sys

    code = ("from garden.rerank.passage import best_passage as b; "
            "t = 'alpha beta gamma. ' + 'filler words here. ' * 6 + 'gamma beta alpha.'; "
            "print(b(t, {'alpha': 0.1, 'beta': 0.2, 'gamma': 0.3}, 40))")
    seen = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": seed}).stdout.strip() for seed in ("1", "2", "3", "4")}
    text = "alpha beta gamma. " + "filler words here. " * 6 + "gamma beta alpha."
    assert seen == {str(best_passage(text, {"alpha": 0.1, "beta": 0.2, "gamma": 0.3}, 40))}
    assert best_passage(text, {"alpha": 0.1, "beta": 0.2, "gamma": 0.3}, 40)[1] == len(text)
