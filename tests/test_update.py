"""The update stage (garden/rerank/update.py): asked about the present, the newest of one
speaker's matching statements leads, and the older ride as history."""
from __future__ import annotations

import pytest

from garden.formats.stories import load_story
from garden.rerank.update import asks_now
from kiln_lane import FIXTURES, ask


@pytest.mark.parametrize("query, word", [
    ("What is my studio rent now?", "now"),
    ("Where do I currently work?", "currently"),
    ("What is my current record?", "current"),
    ("What do I drink these days?", "these days"),
    ("Do I still   play the fiddle?", "still"),
    ("What is the latest kiln I bought?", "latest"),
    ("Which was the most recent firing?", "most recent"),
    ("What is my studio rent?", None),
    ("What did I know about the snow?", None),       # 'know' and 'snow' hold 'now', not the word
    ("Who is the nowcaster?", None),
])
def test_what_asks_about_the_present(query, word):
    assert asks_now(query) == word


def _run(story, query, pipeline="default"):
    return ask(query, pipeline, story, standout=1)


def test_the_newest_leads_and_the_older_rides_labelled():
    story = load_story(FIXTURES / "kiln-lane.yaml")
    outcome = _run(story, "What is my studio rent now?")
    assert outcome.stages["update"] == {"asks": "now", "led": [{"newest": "s3.1", "older": ["s1.3"]}]}
    items = {i.id: i for i in outcome.packet.items}
    ids = [i.id for i in outcome.packet.items]
    assert ids.index("s3.1") < ids.index("s1.3")
    assert "conflicting_or_superseded" in items["s1.3"].labels
    assert "conflicting_or_superseded" not in items["s3.1"].labels
    # the stage decides it: without it (and without the sessions stage, whose session prior
    # favours the later sitting on its own) the older statement leads
    assert _run(story, "What is my studio rent now?", "default-update-sessions").packet.items[0].id == "s1.3"


def test_statements_of_different_speakers_or_far_apart_scores_are_not_one_fact():
    story = load_story(FIXTURES / "kiln-lane.yaml")
    # the assistant's reply about the rise (s3.2) matches too, but it is another speaker's
    outcome = _run(story, "What is my studio rent now?")
    for led in outcome.stages["update"]["led"]:
        speakers = {story.by_id[rid].speaker for rid in [led["newest"], *led["older"]]}
        assert len(speakers) == 1
    # asked about what only one statement holds, nothing is history
    outcome = _run(story, "What glaze is on the breakfast mugs now?")
    assert all("conflicting_or_superseded" not in i.labels for i in outcome.packet.items)


def test_without_a_word_about_the_present_the_stage_does_nothing():
    story = load_story(FIXTURES / "kiln-lane.yaml")
    outcome = _run(story, "What is my studio rent?")
    assert "update" not in outcome.stages
