"""experiments/session_ranking.py's additions from the published systems: each a general
rule of English or of a store's structure, read on made-up questions here, and the choice
among a family made against the rule shipped, not against the first-turn rule."""
from __future__ import annotations

from experiments.session_ranking import (
    SHIPPED, choose, fused_with_documents, key_phrases, phrase_shares, published_parts, variant_name,
)


def test_names_and_double_quoted_phrases_are_the_questions_key_phrases():
    got = key_phrases('What did Ilse say about the "Blue Heron" kiln I fired with Tomas last week?')
    assert got == ["Blue Heron", "Ilse", "Tomas"]
    assert key_phrases("What glaze did I pick for the teapot?") == []   # its first word and "I" name no one
    shares = phrase_shares('Did Ilse like the "Blue Heron" kiln?', {1: "Ilse fired the blue heron kiln", 2: "no"})
    assert shares == {"1": 1.0, "2": 0.0}


def _store_and_question(window):
    """Three sittings of one turn each, dated the 1st, 10th and 20th of May."""
    store = {"ids": ["a", "b", "c"], "turn": [True] * 3, "session": [1, 2, 3], "addressee": [False] * 3,
             "at": ["2032-05-01 09:00:00", "2032-05-10 09:00:00", "2032-05-20 09:00:00"], "cites": [[], [], []],
             "stated": {"1": 0, "2": 2, "3": 0}}
    question = {"window": window, "phrases": {}, "advice": True, "addressed": False, "cos": [0.1, 0.2, 0.3]}
    return store, question


def test_the_widened_window_and_stated_preferences_lift_only_what_they_name():
    store, q = _store_and_question(["2032-05-18", "2032-05-22"])
    scores = {1: 1.0, 2: 1.0, 3: 1.0}
    near = published_parts(store, q, {**SHIPPED, "near": 1.0}, scores)
    assert near == {1: 1.0, 2: 1.0, 3: 2.0}          # the 20th, inside; the 10th is past the widened 14th
    q["window"] = ["2032-05-15", "2032-05-22"]
    assert published_parts(store, q, {**SHIPPED, "near": 1.0}, scores)[2] == 2.0   # within a week of the 15th
    prefs = published_parts(store, q, {**SHIPPED, "prefs": 0.5}, scores)
    assert prefs == {1: 1.0, 2: 1.5, 3: 1.0}
    q["advice"] = False
    assert published_parts(store, q, {**SHIPPED, "prefs": 0.5}, scores) == scores


def test_a_session_document_list_fuses_by_reciprocal_rank():
    q = {"doc_user": {"1": 0.1, "2": 0.9, "3": 0.5}}
    assert fused_with_documents(q, [1, 2, 3], "text", 1.0) == [2, 1, 3]
    assert fused_with_documents(q, [1, 2, 3], "text", 0.25) == [1, 2, 3]


def test_a_family_is_chosen_against_the_rule_shipped():
    """With `reference` the rule shipped, a variant below it on either benchmark is not
    eligible, however much it gains on the other."""
    folds = {"a": {"a1": "fa", "a2": "fb"}, "b": {"b1": "fc", "b2": "fd"}}

    def figures(a: float, b: float) -> dict:
        return {"a": {m: {q: a for q in folds["a"]} for m in ("nDCG@10", "Success@5")},
                "b": {m: {q: b for q in folds["b"]} for m in ("nDCG@10", "Success@5")}}
    first_turn, shipped, lopsided = figures(0.4, 0.4), figures(0.6, 0.6), figures(0.9, 0.55)
    names = ["first turn", variant_name(SHIPPED), "lopsided"]
    chosen, _ = choose([first_turn, shipped, lopsided], folds, names, [2], reference=1)
    assert {c["chosen"] for c in chosen} == {variant_name(SHIPPED)}
