"""Phrase contiguity: shingles, the span index, refusals and the bounded bonus."""
from __future__ import annotations

import pytest

from garden.analyzer import word_runs
from garden.rerank.phrase import MAX_SPAN, PhraseIndex, phrase_credit, refusal, shingles, span_bonus


def credit_for(texts: dict[str, str], query: str, kinds: dict[str, str] | None = None, **kw):
    kinds = kinds or {rid: "note" for rid in texts}
    return phrase_credit(PhraseIndex(texts), query, kinds, **kw)


def spanned(credit, span: str) -> dict:
    hits = [t for t in credit.tested if t["span"] == span]
    assert len(hits) == 1, (span, credit.tested)
    return hits[0]


# --- shingles and the index ---------------------------------------------------------


def test_shingles_are_every_contiguous_span_of_two_or_more_words():
    assert shingles([["glacier", "custard", "incident"]]) == {
        ("glacier", "custard"), ("custard", "incident"), ("glacier", "custard", "incident")}


def test_shingles_never_cross_runs_and_skip_single_words():
    assert shingles([["glacier"], ["custard", "incident"]]) == {("custard", "incident")}
    assert shingles([["alone"]]) == set()
    assert shingles([]) == set()


def test_shingles_stop_at_the_maximum_length():
    run = [f"w{i}" for i in range(12)]
    spans = shingles([run])
    assert max(len(s) for s in spans) == MAX_SPAN
    assert min(len(s) for s in spans) == 2
    assert shingles([run], max_len=3) == {tuple(run[i:i + n]) for n in (2, 3) for i in range(len(run) - n + 1)}


def test_phrase_index_maps_each_span_to_its_holders():
    index = PhraseIndex({"r1": "The Glacier custard incident.", "r2": "glacier custard again", "r3": "custard glacier"})
    assert index.holders(("glacier", "custard")) == {"r1", "r2"}
    assert index.holders(("custard", "glacier")) == {"r3"}
    assert index.holders(("glacier", "custard", "incident")) == {"r1"}
    assert index.holders(("no", "such")) == set()


# --- refusals -----------------------------------------------------------------------


def test_refusal_reasons():
    assert refusal(("the", "glacier"), 1, 2) == "opens with function word 'the'"
    assert refusal(("glacier", "of"), 1, 2) == "closes with function word 'of'"
    assert refusal(("glacier", "custard"), 0, 2) == "in no record"
    assert refusal(("glacier", "custard"), 3, 2) == "in 3 records, above the ceiling of 2"
    assert refusal(("glacier", "custard"), 2, 2) is None
    assert refusal(("night", "of", "stars"), 1, 2) is None


def test_a_span_opening_or_closing_with_a_function_word_earns_nothing():
    credit = credit_for({"r1": "the custard of the glacier"}, "the custard of the glacier")
    assert spanned(credit, "the custard")["refused"] == "opens with function word 'the'"
    assert spanned(credit, "custard of")["refused"] == "closes with function word 'of'"
    assert spanned(credit, "custard of the glacier")["credited"] is True
    assert credit.span == {"r1": "custard of the glacier"}


def test_an_interior_function_word_is_allowed():
    credit = credit_for({"r1": "a tale of night of stars", "r2": "stars at night"}, "night of stars")
    assert spanned(credit, "night of stars") == {"span": "night of stars", "records": 1, "credited": True,
                                                 "refused": None}
    assert credit.bonus == {"r1": 1.0}


def test_a_span_above_the_ceiling_earns_nothing():
    texts = {f"r{i}": "the glacier custard was served" for i in range(3)}
    refused = credit_for(texts, "glacier custard", ceiling=2)
    assert refused.bonus == {}
    assert spanned(refused, "glacier custard")["refused"] == "in 3 records, above the ceiling of 2"
    allowed = credit_for(texts, "glacier custard", ceiling=3)
    assert set(allowed.bonus) == {"r0", "r1", "r2"}


def test_a_span_in_no_record_earns_nothing():
    credit = credit_for({"r1": "glacier notes"}, "custard incident")
    assert credit.bonus == {}
    assert spanned(credit, "custard incident") == {"span": "custard incident", "records": 0,
                                                  "credited": False, "refused": "in no record"}


def test_a_single_word_earns_nothing():
    credit = credit_for({"r1": "custard"}, "custard")
    assert credit.bonus == {} and credit.tested == []


# --- order, joins and forms ---------------------------------------------------------------


def test_reversed_words_are_never_credited():
    credit = credit_for({"r1": "the glacier custard incident"}, "incident custard glacier")
    assert credit.bonus == {}
    assert all(t["refused"] == "in no record" for t in credit.tested)
    assert len(credit.tested) == 3


def test_reordered_words_are_never_credited():
    credit = credit_for({"r1": "the glacier custard incident"}, "custard glacier incident")
    assert credit.bonus == {}


def test_hyphen_joined_words_are_never_credited():
    credit = credit_for({"r1": "the glacier-custard-incident file"}, "glacier custard incident")
    assert credit.bonus == {}
    assert spanned(credit, "glacier custard")["records"] == 0


@pytest.mark.parametrize("joined", ["glacier,custard", "glacier/custard", "glacier.custard", "glacier_custard"])
def test_punctuation_joined_words_are_never_credited(joined):
    assert credit_for({"r1": f"see {joined} now"}, "glacier custard").bonus == {}


def test_a_hyphen_joined_query_has_no_span():
    credit = credit_for({"r1": "the glacier custard incident"}, "glacier-custard-incident")
    assert credit.bonus == {} and credit.tested == []


def test_plural_forms_are_never_credited():
    credit = credit_for({"r1": "two glacier custards melted"}, "glacier custard")
    assert credit.bonus == {}
    credit = credit_for({"r1": "the glacier custard melted"}, "glaciers custard")
    assert credit.bonus == {}


def test_matching_ignores_case_and_spacing():
    credit = credit_for({"r1": "The GLACIER\n  Custard incident"}, "glacier custard")
    assert credit.bonus == {"r1": 0.5}


# --- the bonus ------------------------------------------------------------------------------


def test_span_bonus_is_bounded_by_the_weight():
    assert span_bonus(2, 1.0) == 0.5
    assert span_bonus(3, 1.0) == 1.0
    assert span_bonus(MAX_SPAN, 2.0) == 2.0
    assert all(span_bonus(n, 1.5) <= 1.5 for n in range(2, 50))


def test_the_longest_credited_span_sets_the_bonus_and_it_stays_bounded():
    text = "alpha bravo charlie delta echo foxtrot golf hotel india juliet"
    credit = credit_for({"r1": text}, text, weight=2.0)
    assert credit.bonus == {"r1": 2.0}
    assert credit.span["r1"] == "alpha bravo charlie delta echo foxtrot golf hotel"
    short = credit_for({"r1": text}, "alpha bravo", weight=2.0)
    assert short.bonus == {"r1": 1.0}


def test_a_view_gets_the_view_fraction_of_the_weight():
    texts = {"canon": "the glacier custard incident", "view": "index: glacier custard incident"}
    kinds = {"canon": "note", "view": "view"}
    credit = credit_for(texts, "glacier custard incident", kinds, weight=1.0, view_fraction=0.5)
    assert credit.bonus == {"canon": 1.0, "view": 0.5}
    assert credit.span == {"canon": "glacier custard incident", "view": "glacier custard incident"}
    quarter = credit_for(texts, "glacier custard incident", kinds, weight=2.0, view_fraction=0.25)
    assert quarter.bonus == {"canon": 2.0, "view": 0.5}


def test_the_bonus_is_not_a_filter():
    credit = credit_for({"r1": "glacier custard", "r2": "unrelated words"}, "glacier custard")
    assert "r2" not in credit.bonus and "r2" not in credit.span


def test_tested_records_every_span_and_why_it_was_refused():
    query = "remember the glacier custard incident"
    credit = credit_for({"r1": "that glacier custard incident", "r2": "glacier custard"}, query)
    expected_spans = {" ".join(s) for s in shingles(word_runs(query))}
    assert {t["span"] for t in credit.tested} == expected_spans
    assert len(credit.tested) == len(expected_spans) == 10
    for t in credit.tested:
        assert set(t) == {"span", "records", "credited", "refused"}
        assert t["credited"] == (t["refused"] is None)
    assert spanned(credit, "remember the")["refused"] == "closes with function word 'the'"
    assert spanned(credit, "the glacier")["refused"] == "opens with function word 'the'"
    assert spanned(credit, "remember the glacier")["refused"] == "in no record"
    assert spanned(credit, "glacier custard")["records"] == 2
    assert spanned(credit, "glacier custard incident")["credited"] is True
    assert [len(t["span"].split()) for t in credit.tested] == sorted(
        (len(t["span"].split()) for t in credit.tested), reverse=True)


# --- mixed Chinese and Latin text ---------------------------------------------------------


def test_cjk_text_breaks_word_runs():
    assert word_runs("我们的 glacier custard 事件") == [["glacier", "custard"]]
    assert word_runs("glacier 的 custard") == [["glacier"], ["custard"]]
    assert word_runs("glacier的custard") == [["glacier"], ["custard"]]


def test_a_latin_span_inside_chinese_text_is_credited():
    texts = {"log": "营地日志：glacier custard incident 之后大家都笑了", "chat": "custard 和 glacier 都很冷"}
    credit = credit_for(texts, "还记得 glacier custard incident 吗")
    assert credit.bonus == {"log": 1.0}
    assert credit.span == {"log": "glacier custard incident"}


def test_chinese_between_two_latin_words_is_not_a_span():
    credit = credit_for({"r1": "glacier 的 custard"}, "glacier custard")
    assert credit.bonus == {}
    assert spanned(credit, "glacier custard")["records"] == 0


# --- the span index against a reference: a dictionary of every span's holders ---------------

from hypothesis import given, settings, strategies as st  # noqa: E402

WORDS = st.sampled_from(["glacier", "custard", "the", "ice", "tea", "of", "stove", "冰川"])
TEXTS = st.lists(st.lists(st.one_of(WORDS, st.sampled_from([",", "-", "。"])), max_size=14)
                 .map(lambda ws: " ".join(ws)), min_size=1, max_size=8)


def reference_holders(texts: dict[str, str]) -> dict[tuple[str, ...], set[str]]:
    out: dict[tuple[str, ...], set[str]] = {}
    for rid, text in texts.items():
        for span in shingles(word_runs(text)):
            out.setdefault(span, set()).add(rid)
    return out


@settings(max_examples=200, derandomize=True, deadline=None)
@given(TEXTS, st.lists(WORDS, min_size=2, max_size=MAX_SPAN + 1))
def test_span_index_counts_and_holders_match_the_reference(texts, query):
    docs = {f"r{i}": t for i, t in enumerate(texts)}
    index, reference = PhraseIndex(docs), reference_holders(docs)
    for span in list(reference) + [tuple(query)]:
        expected = reference.get(span, set())
        assert index.count(span) == len(expected), span
        assert index.holders(span) == expected, span
