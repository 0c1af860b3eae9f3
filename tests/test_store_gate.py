"""The decide stage's gate read against each store's own scale: the store's reference
(garden/pipelines/store_reference.py), the calibration stage that arms it, and what a silent
query says of where its support fell.

The contrast is regression/store-scale.yaml on two fictional stores of different scales
(fixtures/tern-quay.yaml, short chat lines; fixtures/linden-row.yaml, a chat with a note in
the third person for every turn; experiments/gate_contrast_stories.py wrote both). The
development figures the level's weights were chosen on are pinned in
tests/test_locomo_compare.py and tests/test_longmemeval_dev.py.
"""
from __future__ import annotations

import json
import stat
from pathlib import Path

import numpy as np
import pytest

from garden.api import run_case
from garden.cli import main
from garden.derived.saves import COUNTS
from garden.formats.stories import load_story
from garden.models import Story
from garden.pipelines import make_pipeline
from garden.pipelines.store_reference import (KNOWN_ITEMS, MIN_RECORDS, PROCESS_REFERENCES, STAND_INS,
                                              build_reference, foreign_questions, known_item_queries, reference_of)
from garden.rerank.decide import GLOBAL_LEVEL, supports
from garden.rerank.query import QuerySpec
from garden.retrievers import documents

PROJECT = Path(__file__).resolve().parents[1]
CASE = PROJECT / "regression" / "store-scale.yaml"
CHAT = PROJECT / "fixtures" / "tern-quay.yaml"
NOTED = PROJECT / "fixtures" / "linden-row.yaml"
ANSWERABLE = "What colour did Oskar paint the dinghy?"       # tern-quay's chat.s08.t06 answers it
FOREIGN = "What did Ines cook at the harvest supper?"         # nothing in linden-row answers it


def decided(pipeline: str, path: Path, query: str) -> dict:
    story = load_story(path)
    return make_pipeline(pipeline).run(QuerySpec(story, query, story.latest)).stages["decide"]


# --- the contrast ------------------------------------------------------------------------


def test_the_contrast_case_needs_the_store_s_own_scale():
    assert run_case(CASE)["passed"]
    without = run_case(CASE, "default-calibration")
    assert not without["passed"]
    assert any("lead: expected chat.s08.t06" in f for f in without["failures"])


def test_no_single_threshold_of_the_support_serves_both_stores():
    chat, noted = decided("default", CHAT, ANSWERABLE), decided("default", NOTED, FOREIGN)
    # the answerable question's support sits below the foreign one's: any one threshold is
    # silent on the first or answers the second ...
    assert chat["support"] < noted["support"]
    # ... while each store's own threshold puts each on its right side
    assert chat["answers"] and chat["support"] >= chat["threshold"]
    assert not noted["answers"] and noted["support"] < noted["threshold"]
    assert chat["level"] < GLOBAL_LEVEL < noted["level"]
    # without the calibration stage both stores read the global level
    assert decided("default-calibration", CHAT, ANSWERABLE)["level"] == GLOBAL_LEVEL


# --- the reference -------------------------------------------------------------------------


def test_a_reference_is_drawn_from_the_store_s_text_alone():
    story = load_story(CHAT)
    drawn = known_item_queries(story)
    assert len(drawn) == KNOWN_ITEMS and drawn == known_item_queries(story)
    texts = {d.id: d.text for d in documents(story)}   # what the retrievers index: a record's title and text
    for rid, query in drawn:
        words = query.split()
        assert 3 <= len(words) <= 5 and all(w in texts[rid] for w in words)
    # the same text under other ids draws the same queries: the draw reads the story's order,
    # not its ids or its name
    data = story.model_dump(mode="json", exclude_unset=True)
    renamed = {r["id"]: f"x{n:04d}" for n, r in enumerate(data["records"])}
    for r in data["records"]:
        r["id"] = renamed[r["id"]]
    data["story"] = "elsewhere"
    other = Story.model_validate(data)
    assert [q for _, q in known_item_queries(other)] == [q for _, q in drawn]


def test_the_foreign_questions_name_the_store_s_people_or_stand_ins():
    chat = foreign_questions(load_story(CHAT))
    assert len(chat) >= 200 and not any("{" in q for q in chat)
    assert any("Maelle" in q for q in chat) and any("Oskar" in q for q in chat)
    unnamed = foreign_questions(load_story(PROJECT / "fixtures" / "aurora-ridge.yaml"))
    assert any(STAND_INS[0] in q for q in unnamed)


def test_a_store_too_small_keeps_the_global_level(home):
    story = load_story(PROJECT / "fixtures" / "aurora-ridge.yaml")
    assert len(known_item_queries(story)) == 0   # fewer than MIN_RECORDS records to draw from
    assert sum(1 for r in story.records if r.kind != "control") < MIN_RECORDS
    outcome = make_pipeline("default").run(QuerySpec(story, "Which observation log do we use now?", story.latest))
    assert outcome.stages["decide"]["level"] == GLOBAL_LEVEL and outcome.stages["decide"]["standing"] is None
    assert outcome.packet.gate is not None and not outcome.packet.gate.reference


def test_the_reference_is_saved_owner_only_and_read_back(home):
    story = load_story(CHAT)
    pipeline = make_pipeline("default")
    members = pipeline.indexes.retriever(story, pipeline.retriever_name).members().values()
    PROCESS_REFERENCES.clear()
    built = reference_of(pipeline, story, members)
    saves = list((home / ".garden" / "index").glob("tern-quay.table_reference*"))
    assert len(saves) == 1 and stat.S_IMODE(saves[0].stat().st_mode) == 0o600
    # a fresh process (no process cache, a freshly loaded story) reads the save
    PROCESS_REFERENCES.clear()
    before = COUNTS[next(k for k in COUNTS if k.startswith("table:reference") and k.endswith(":built"))]
    again = reference_of(pipeline, load_story(CHAT), members)
    assert np.array_equal(again.known, built.known) and np.array_equal(again.foreign, built.foreign)
    assert COUNTS[next(k for k in COUNTS if k.startswith("table:reference") and k.endswith(":built"))] == before
    # a damaged save is one warning and made again
    saves[0].write_bytes(b"not a save")
    PROCESS_REFERENCES.clear()
    rebuilt = reference_of(pipeline, load_story(CHAT), members)
    assert np.array_equal(rebuilt.known, built.known)


def test_a_changed_store_gets_a_reference_of_its_own(home):
    story = load_story(CHAT)
    data = story.model_dump(mode="json", exclude_unset=True)
    data["records"][0]["text"] = "Maelle: The lighthouse keeper retired and moved inland to grow lavender."
    changed = Story.model_validate(data)
    pipeline = make_pipeline("default")
    first, second = build_reference(pipeline, story), build_reference(pipeline, changed)
    assert not np.array_equal(first.known, second.known) or not np.array_equal(first.foreign, second.foreign)


def test_the_level_is_the_documented_statistics_of_the_reference():
    from garden.rerank.decide import FOREIGN_LEVEL, FOREIGN_WEIGHT, KNOWN_WEIGHT

    reference = build_reference(make_pipeline("default"), load_story(CHAT))
    expected = (KNOWN_WEIGHT * supports(reference.known).mean()
                + FOREIGN_WEIGHT * np.quantile(supports(reference.foreign), FOREIGN_LEVEL))
    assert reference.level() == pytest.approx(expected)
    standing = reference.standing(float(np.median(supports(reference.known))))
    assert standing["known_above"] <= 0.5 and 0 <= standing["foreign_below"] <= 1


# --- what a silent query says ---------------------------------------------------------------


def test_a_silent_query_says_where_its_support_fell_in_its_store(home, capsys):
    assert main(["query", str(NOTED), FOREIGN]) == 0
    out = capsys.readouterr().out
    assert "silent: nothing stood out as an answer" in out
    assert "this store's threshold" in out and "of this store's known-item queries" in out
    assert all(len(line) <= 80 for line in out.splitlines())
    assert main(["query", str(NOTED), FOREIGN, "--json"]) == 0
    packet = json.loads(capsys.readouterr().out)
    gate = packet["gate"]
    assert packet["items"] == [] and gate["reference"] and not gate["answers"]
    assert gate["support"] < gate["threshold"] and 0 <= gate["known_above"] <= 1


def test_a_request_s_time_limit_never_stops_a_reference_halfway(home):
    from garden._deadline import DeadlineExceeded, deadline

    story = load_story(CHAT)
    pipeline = make_pipeline("default")
    PROCESS_REFERENCES.clear()
    with deadline(0.001):
        # the reference's own 300 queries run their stages with no limit: made whole, and saved
        assert pipeline.reference(story) is not None
        # while the request's own stages are checked as before
        with pytest.raises(DeadlineExceeded):
            pipeline.run(QuerySpec(story, ANSWERABLE, story.latest))
    assert list((home / ".garden" / "index").glob("tern-quay.table_reference*"))
    PROCESS_REFERENCES.clear()
    with deadline(30):
        assert pipeline.run(QuerySpec(load_story(CHAT), ANSWERABLE, story.latest)).packet.items


def test_a_server_warms_each_store_s_reference(home):
    from garden.pipelines import warm_up

    story = load_story(NOTED)
    PROCESS_REFERENCES.clear()
    warm_up(make_pipeline("default"), QuerySpec(story, "warm", story.latest))
    assert list((home / ".garden" / "index").glob("linden-row.table_reference*"))
