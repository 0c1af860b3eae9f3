"""LongMemEval's retrieval measures as its authors define them (garden/evaluation/
longmemeval_scoring.py), each worked out by hand on a tiny ranking, and set beside
ir-measures' nDCG to show where the discount differs."""
from __future__ import annotations

import math

import ir_measures
import pytest

from garden.evaluation.longmemeval_scoring import (KS, author_gold, dcg, measures, ndcg_any, recall_all, recall_any,
                                                   session_depth, turn_ranking_at_session_level)

CORPUS = ["a", "b", "c", "d", "e"]


def test_the_discount_leaves_the_second_document_undiscounted():
    assert dcg([1, 1, 1], 3) == pytest.approx(1 + 1 / math.log2(2) + 1 / math.log2(3))  # 1 + 1 + 0.6309
    assert dcg([0, 1], 2) == 1.0  # trec_eval's discount would give 1 / log2(3) = 0.631
    assert dcg([1, 1, 1], 1) == 1.0 and dcg([], 5) == 0.0
    with pytest.raises(ValueError):
        dcg([1], 0)


def test_ndcg_against_the_corpus_ideal_worked_by_hand():
    # gold b and d; ranking c, b, a, d: relevances 0, 1, 0, 1
    # DCG@3 = 0 + 1/log2(2) + 0 = 1; ideal over the corpus (1, 1, 0, ...) @3 = 1 + 1 = 2
    assert ndcg_any(["c", "b", "a", "d"], {"b", "d"}, CORPUS, 3) == pytest.approx(0.5)
    # @4: DCG = 1 + 1/log2(4) = 1.5; ideal = 2
    assert ndcg_any(["c", "b", "a", "d"], {"b", "d"}, CORPUS, 4) == pytest.approx(0.75)
    # a gold document outside the corpus counts for nothing in the ideal
    assert ndcg_any(["z"], {"z"}, CORPUS, 3) == 0.0


def test_the_same_ranking_scores_higher_here_than_under_trec_eval():
    ranking, gold = ["c", "b"], {"b"}
    ours = ndcg_any(ranking, gold, CORPUS, 2)
    theirs = ir_measures.calc_aggregate([ir_measures.nDCG @ 2], [ir_measures.Qrel("q", "b", 1)],
                                        [ir_measures.ScoredDoc("q", "c", 2.0), ir_measures.ScoredDoc("q", "b", 1.0)])
    assert ours == 1.0 and theirs[ir_measures.nDCG @ 2] == pytest.approx(1 / math.log2(3))


def test_recall_any_and_all():
    ranking = ["c", "b", "a", "d"]
    assert recall_any(ranking, ["d", "b"], 1) == 0.0 and recall_any(ranking, ["d", "b"], 2) == 1.0
    assert recall_all(ranking, ["d", "b"], 3) == 0.0 and recall_all(ranking, ["d", "b"], 4) == 1.0
    assert set(measures(ranking, ["b"], CORPUS, 5)) == {"recall_any@5", "recall_all@5", "ndcg_any@5"}
    assert KS == (1, 3, 5, 10, 30, 50)


def session(turn: str) -> str:
    return turn.split(".")[0]


def test_a_turn_ranking_at_session_level_grows_k_until_k_sessions():
    # turns of sessions s1 (3 turns), s2, s3; gold turn s2.1
    corpus = ["s1.1", "s1.2", "s1.3", "s2.1", "s3.1"]
    ranking = ["s1.1", "s1.2", "s2.1", "s1.3", "s3.1"]
    # two sessions are first covered at depth 3 (s1, s1, s2)
    assert session_depth(ranking, session, 2, len(corpus)) == 3
    got = turn_ranking_at_session_level(ranking, ["s2.1"], corpus, session, 2)
    # over the top 3 turns as sessions: s1, s1, s2; gold session s2 is in: recall 1
    assert got["recall_any@2"] == 1.0 and got["recall_all@2"] == 1.0
    # relevances 0, 0, 1 -> DCG = 1/log2(3); ideal over the corpus as sessions (one s2 turn) = 1
    assert got["ndcg_any@2"] == pytest.approx(1 / math.log2(3))
    # at one session only the first turn counts: s1, not gold
    assert turn_ranking_at_session_level(ranking, ["s2.1"], corpus, session, 1)["recall_any@1"] == 0.0
    # asking for more sessions than exist stops one past the corpus, or at k when k is past it
    assert session_depth(ranking, session, 4, len(corpus)) == len(corpus) + 1
    assert session_depth(ranking, session, 9, len(corpus)) == 9


def record(**changes) -> dict:
    base = {"question_id": "q7", "answer_session_ids": ["answer_1", "answer_2"],
            "haystack_session_ids": ["noise_1", "answer_1", "answer_2"],
            "haystack_sessions": [
                [{"role": "user", "content": "the kiln", "has_answer": True}],          # not an evidence session
                [{"role": "user", "content": "glaze"}, {"role": "assistant", "content": "ok", "has_answer": True},
                 {"role": "user", "content": "celadon", "has_answer": True}],
                [{"role": "assistant", "content": "cone 6", "has_answer": True}],       # assistant-side only
            ]}
    base.update(changes)
    return base


def test_the_authors_gold_counts_user_turns_in_evidence_sessions_only():
    sessions, turns = author_gold(record())
    assert sessions == ["answer_1"] and turns == [(1, 2)]
    assert author_gold(record(question_id="q7_abs")) is None  # abstention: left out
    only_assistant = record(answer_session_ids=["answer_2"])
    assert author_gold(only_assistant) is None                 # no user-side evidence turn: left out
