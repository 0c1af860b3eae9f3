"""The registry of whole-store tables (garden/derived/tables.py): one fold a table, one name
a rule; every table a query reads is declared by a stage of the list, so a story in
Milvus, which holds only the declared ones, holds what its queries read."""
from __future__ import annotations

from pathlib import Path

import pytest

from garden import api
from garden.derived import tables
from garden.derived.tables import TABLES, Table, in_memory, numbers_codec, table
from garden.formats.stories import load_story
from garden.models import Story

ROOT = Path(__file__).resolve().parents[1]
QUERIES = {  # a conversation with sittings, a store of notes citing turns, a curated story
    "tern-quay": ["What colour did Oskar paint the dinghy?", "Who fixed the outboard?"],
    "linden-row": ["What did Ines cook at the harvest supper?", "who planted the pear tree"],
    "aurora-ridge": ["what does mira play", "which stove did we choose and why"],
}


def test_every_table_a_query_reads_is_declared_by_a_stage(project, monkeypatch):
    """Every table read while queries run (the stages, and the calibration stage's reference
    built for the story) is one a stage of the list declares: what ingest folds."""
    from garden.pipelines.store_reference import PROCESS_REFERENCES
    from garden.store.milvus import declared_tables

    # a reference an earlier test of this process made for the same story is reused, and
    # would hide the tables its making reads
    PROCESS_REFERENCES.clear()
    read: set[str] = set()
    of = Table.of

    def noted(self, story):
        read.add(self.name)
        return of(self, story)

    monkeypatch.setattr(Table, "of", noted)
    for name, queries in QUERIES.items():
        story = load_story(ROOT / "fixtures" / f"{name}.yaml")
        for text in queries:
            api.query(story, text)
    declared = {t.name for t in declared_tables()}
    assert read <= declared, sorted(read - declared)
    assert {"neighbours", "sessions", "notes_citing", "entity_selectivity", "speakers", "vocabulary",
            "known_item_pool"} <= read


def test_a_table_folded_in_one_pass_is_the_table_folded_alone():
    from garden.store.milvus import declared_tables

    story = load_story(ROOT / "fixtures" / "tern-quay.yaml")
    every = declared_tables()
    together = tables.fold_all(story, story.records, every)
    with in_memory():
        assert together == {t.name: t.of(story) for t in every}


def test_a_name_is_one_rule():
    class Other:
        def __init__(self, story: Story):
            pass

    assert "neighbours" in TABLES
    with pytest.raises(ValueError, match="table 'neighbours' is registered twice"):
        table("neighbours", Other, numbers_codec())
    assert TABLES["neighbours"].fold is not Other
