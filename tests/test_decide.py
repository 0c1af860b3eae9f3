"""The decide and fill stages (garden/rerank/decide.py, fill.py) and the packer's
`already_shown` rule, on Aurora Ridge and on fictional records."""
from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from garden.formats.stories import load_story
from garden.models import Hints, Record
from garden.rerank.stages import Settings
from garden.pipelines import make_pipeline
from garden.rerank.candidates import Candidate
from garden.rerank.decide import (GLOBAL_LEVEL, HELD_DEPTH, W_BIAS, W_HELD, W_KNOWN, W_SECOND, W_TOP, Vocabulary,
                                  gate_score, query_support, support, supports, vocabulary)
from garden.rerank.pack import pack
from garden.rerank.query import QuerySpec

STORY = load_story(Path(__file__).resolve().parents[1] / "fixtures" / "aurora-ridge.yaml")
AS_OF = dt.date(2030, 1, 12)


def run(query: str, pipeline: str = "default", **settings):
    return make_pipeline(pipeline).run(QuerySpec(STORY, query, AS_OF, 1200, Hints(), False, Settings(**settings), []))


# --- the support ------------------------------------------------------------------------------


def test_the_support_is_the_documented_formula():
    assert support(1.0, 0.5, 0.25, 1.0) == pytest.approx(W_HELD * 0.5 + W_KNOWN * 0.25 + W_BIAS)
    assert support(1.0, 0.5, 0.25, 0.5) == pytest.approx(W_HELD * 0.5 + W_KNOWN * 0.25 + W_SECOND * math.log(0.5)
                                                         + W_BIAS)
    # nothing scored: floored, finite
    assert support(0.0, 0.0, 0.0, 0.0) == pytest.approx((W_TOP + W_SECOND) * math.log(1e-3) + W_BIAS)
    # the vectorized form the reference's level reads agrees with it
    parts = np.array([[1.0, 0.5, 0.25, 0.5], [0.2, 0.1, 1.0, 0.0]])
    assert supports(parts) == pytest.approx([support(*row) for row in parts.tolist()])


def test_a_term_the_store_lacks_weighs_most_and_counts_nothing_known():
    vocab = Vocabulary(10, Counter({"kiln": 1, "frost": 9}))
    assert vocab.weight("absent") > vocab.weight("kiln") > vocab.weight("frost") > 0
    parts = query_support("kiln frost", vocab, [(1.0, "the kiln cracked"), (0.5, "frost and kiln together")])
    assert parts["known"] == pytest.approx(1.0)
    assert parts["held"] == pytest.approx(1.0)  # the second record holds both terms
    lacking = query_support("kiln dragon", vocab, [(1.0, "the kiln cracked")])
    share = vocab.weight("kiln") / (vocab.weight("kiln") + vocab.weight("dragon"))
    assert lacking["known"] == pytest.approx(share) and lacking["held"] == pytest.approx(share)


def test_held_reads_only_the_best_candidates():
    vocab = Vocabulary(10, Counter({"kiln": 1}))
    ranked = [(1.0, "nothing here")] * HELD_DEPTH + [(0.1, "kiln")]
    assert query_support("kiln", vocab, ranked)["held"] == 0.0


def test_a_query_of_stopwords_alone_has_no_support_parts():
    parts = query_support("what is the", Vocabulary(5, Counter()), [(1.0, "anything")])
    assert parts["known"] == parts["held"] == 0.0


def test_the_vocabulary_is_built_once_per_story():
    assert vocabulary(STORY) is vocabulary(STORY)
    assert vocabulary(STORY).documents == sum(1 for r in STORY.records if r.kind != "control")


# --- the stage in the pipeline -------------------------------------------------------------------


def test_the_trace_carries_the_support_and_the_gate_score_reads_it():
    outcome = run("Why have I not felt like gaming recently?")
    decided = outcome.stages["decide"]
    assert {"top", "held", "known", "second", "support", "level", "calibrated", "threshold", "answer_at",
            "decisive", "answers"} <= set(decided)
    assert decided["answers"] and outcome.packet.items
    # what the gate thresholds: the support less the store's level
    assert gate_score(outcome.stages) == decided["calibrated"]
    assert decided["calibrated"] == pytest.approx(decided["support"] - decided["level"], abs=1e-5)
    assert decided["threshold"] == pytest.approx(decided["level"] + decided["answer_at"], abs=1e-5)
    assert outcome.packet.gate is not None and outcome.packet.gate.threshold == decided["threshold"]
    assert gate_score(run("Why have I not felt like gaming recently?", "default-decide").stages) is None


def test_a_support_under_the_threshold_silences_and_says_why():
    query = "Which observation log do we use now?"  # finite lane ratios: the support decides
    assert run(query).packet.items
    silent = run(query, answer_at=50.0)
    assert not silent.packet.items
    reasons = {r.reason for r in silent.packet.rejected}
    assert "below_standout" in reasons
    detail = next(r.detail for r in silent.packet.rejected if r.reason == "below_standout")
    # a store this small keeps the global level: its threshold is that level plus answer_at
    assert f"below this store's threshold {GLOBAL_LEVEL + 50:.2f}" in detail and "the global level" in detail


def test_a_decisive_lane_answers_whatever_the_support():
    query = "Why did the expedition originally choose paper?"  # nothing contests it: ratio infinite
    assert run(query, answer_at=50.0).packet.items
    assert not run(query, answer_at=50.0, decisive=1e9).packet.items or any(
        lane["ratio_infinite"] for lane in run(query, answer_at=50.0, decisive=1e9).stages["standout"])


def test_with_the_cutoff_off_every_query_answers():
    query = "Which observation log do we use now?"
    assert run(query, answer_at=50.0, standout=1).packet.items


# --- fill ---------------------------------------------------------------------------------------------


def test_fill_lets_more_than_the_cap_ride_and_a_given_lane_cap_still_bounds():
    query = "我们的营地日志里写过无人机吗？"  # the cutoff off below: every weekly log's filler matches
    deep = {lane["lane"]: lane for lane in run(query, standout=1).stages["standout"]}
    assert len(deep["evidence"]["riding"]) > 3
    capped = {lane["lane"]: lane for lane in run(query, standout=1, lane_cap=1).stages["standout"]}
    assert all(len(lane["riding"]) <= 1 for lane in capped.values())
    without = {lane["lane"]: lane for lane in run(query, "default-fill", standout=1).stages["standout"]}
    assert all(len(lane["riding"]) <= 3 for lane in without.values())


def candidate(rid: str, text: str, sources=(), certain=False) -> Candidate:
    record = Record(id=rid, kind="note" if sources else "source", text=text, sources=list(sources),
                    at=dt.date(2031, 1, 1))
    return Candidate(record, score=1.0, certain=certain)


def test_a_turn_behind_the_note_that_cites_it_is_already_shown():
    note, turn, other = candidate("n1", "restated", ["t1"]), candidate("t1", "the turn"), candidate("t2", "another")
    packed, used = pack([note, turn, other], 1200, 0, set())
    assert [c.id for c in packed] == ["n1", "t2"] and turn.reason == "already_shown"
    assert used == len("restated") + len("another")


def test_without_fill_or_on_a_certain_route_nothing_is_skipped_as_shown():
    note, turn = candidate("n1", "restated", ["t1"]), candidate("t1", "the turn")
    assert [c.id for c in pack([note, turn], 1200)[0]] == ["n1", "t1"]
    note, turn = candidate("n1", "restated", ["t1"]), candidate("t1", "the turn", certain=True)
    assert [c.id for c in pack([note, turn], 1200, 0, set())[0]] == ["n1", "t1"]
