"""A story that lives in Milvus (garden.store.milvus): ingested from JSON Lines, its
records read by id, its tables saved owner-only in the garden; it serves the packets the
same story serves from its file, embedded and on a server; above the reference's floor it
makes and reads its own reference, so it decides as its file does whichever is asked
first; a table it was not given is refused in one line."""
from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import yaml

from garden import api
from garden.errors import GardenError, StoryError
from garden.formats.stories import load_story
from test_milvus import MISSING, needs_milvus, server  # noqa: F401  (the server fixture)
from test_milvus_standalone import standalone  # noqa: F401  (the standalone fixture)

ROOT = Path(__file__).resolve().parents[1]
QUERIES = [  # (text, as_of, include_private)
    ("Why have I not felt like gaming recently?", "2030-01-06", False),
    ("what does mira play", None, False),
    ("kerosene stove", None, False),
    ("which stove did we choose and why", "2029-11-20", False),
    ("who watches the night sky", None, True),
    ("what did jonas say about sleeping", None, False),
]


def as_lines(story_path: Path, folder: Path) -> Path:
    """The YAML story written as JSON Lines (a header line, a record a line)."""
    data = load_story(story_path).model_dump(mode="json", exclude_defaults=True)
    records = data.pop("records")
    out = folder / f"{story_path.stem}.jsonl"
    out.write_text("".join(json.dumps(line) + "\n" for line in [data, *records]))
    return out


@pytest.fixture
def lines(tmp_path, monkeypatch):
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    (tmp_path / "fixtures").mkdir()
    yield as_lines(ROOT / "fixtures" / "aurora-ridge.yaml", tmp_path / "fixtures")
    if not MISSING:
        from milvus_lite.server_manager import server_manager_instance

        server_manager_instance.release_server(str(tmp_path / ".garden" / "milvus" / "garden.db"))


@needs_milvus
@pytest.mark.parametrize("where", ["store", "server"])
def test_a_story_in_milvus_serves_the_packets_of_its_file(where, request, lines):
    from garden.store.milvus import StoredStory, ingest, stored_story

    uri = request.getfixturevalue("server") if where == "server" else None
    done = ingest(lines, uri=uri)
    assert done["records"] == 48 and done["documents"] == 47 and set(done["collections"]) >= {"records"}
    stored = stored_story("aurora-ridge")
    assert isinstance(stored, StoredStory) and len(stored.records) == len(stored.by_id) == 48
    story = load_story(ROOT / "fixtures" / "aurora-ridge.yaml")
    pipeline = "default@milvus-hybrid" + (f":uri={uri}" if uri else "")
    for text, as_of, private in QUERIES:
        ours = api.query(story, text, pipeline=pipeline, as_of=as_of, include_private=private)
        theirs = api.query(stored, text, pipeline=pipeline, as_of=as_of, include_private=private)
        assert theirs == ours, text
    assert any(api.query(stored, t, pipeline=pipeline, as_of=a)["items"] for t, a, _ in QUERIES)
    again = ingest(lines, uri=uri)
    assert set(again["inserted"].values()) == {0}   # found, not written again


@needs_milvus
def test_what_a_stored_story_keeps_in_the_garden_is_owner_only(lines):
    from garden.store.milvus import ingest

    ingest(lines)
    folder = lines.parent.parent / ".garden" / "stored"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["aurora-ridge.json", "aurora-ridge.phrase.npz", "aurora-ridge.tables.npz"]
    assert all(stat.S_IMODE((folder / name).stat().st_mode) == 0o600 for name in names)


@needs_milvus
def test_a_bad_record_is_refused_naming_it_and_nothing_is_stored(lines):
    from garden.store.milvus import ingest, stored_story

    text = lines.read_text().splitlines()
    record = json.loads(text[5])
    record["topics"] = ["no_such_topic"]
    text[5] = json.dumps(record)
    lines.write_text("\n".join(text) + "\n")
    with pytest.raises(StoryError) as exc:
        ingest(lines)
    assert any(record["id"] in m and "topics" in m and "no_such_topic" in m for m in exc.value.messages)
    with pytest.raises(GardenError, match="not ingested"):
        stored_story("aurora-ridge")


@needs_milvus
def test_a_pipeline_needs_the_members_it_was_ingested_for(lines):
    from garden.store.milvus import ingest, stored_story

    ingest(lines, retriever="milvus-bm25")
    stored = stored_story("aurora-ridge")
    assert api.query(stored, "kerosene stove", pipeline="default@milvus-bm25")["items"]
    with pytest.raises(GardenError) as exc:
        api.query(stored, "kerosene stove", pipeline="default@milvus-bm25:k1=1.2")
    assert len(exc.value.messages) == 1 and "ingested for milvus-bm25" in exc.value.messages[0]


@needs_milvus
def test_a_stored_story_refuses_its_records_whole_and_a_table_it_does_not_hold(lines):
    from garden.derived.tables import TABLES
    from garden.store.milvus import ingest, stored_story

    ingest(lines)
    stored = stored_story("aurora-ridge")
    with pytest.raises(GardenError) as exc:
        list(stored.records)
    assert exc.value.messages == ["story aurora-ridge lives in Milvus: its records are read by id, never all at once"]
    with pytest.raises(GardenError) as exc:   # made from every record, and not saved at ingest
        stored.remembered("documents", lambda s: [r.id for r in s.records])
    assert len(exc.value.messages) == 1 and "story aurora-ridge" in exc.value.messages[0]
    assert "documents is made from every record" in exc.value.messages[0]
    # a registered table the tables file does not hold (a stage that read it came later)
    tables = lines.parent.parent / ".garden" / "stored" / "aurora-ridge.tables.npz"
    TABLES["an_unsaved_table"] = TABLES["speakers"]
    try:
        with pytest.raises(GardenError) as exc:
            stored.remembered("an_unsaved_table", lambda s: frozenset())
    finally:
        del TABLES["an_unsaved_table"]
    assert exc.value.messages == [f"{tables}: story aurora-ridge in Milvus holds no table an_unsaved_table (a "
                                  "stage reads it that was not there at ingest); ingest the story again"]


@needs_milvus
def test_a_stored_story_holds_the_tables_its_stages_declare_as_its_file_folds_them(lines):
    from garden.derived.tables import in_memory
    from garden.store.milvus import declared_tables, ingest, stored_story

    names = {t.name for t in declared_tables()}
    assert {"neighbours", "notes_citing", "entity_selectivity", "sessions", "speakers", "vocabulary",
            "known_item_pool", "people"} <= names
    ingest(lines)
    stored = stored_story("aurora-ridge")
    with in_memory():
        story = load_story(lines)
        for table in declared_tables():
            assert table.of(stored) == table.build(story), table.name


# --- a story above the reference's floor: the same decisions, whichever is asked first ------

GENERATED = 200   # the generator's least story: above the reference's 100 records


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A generated story of GENERATED records (JSON Lines) and its cases' queries."""
    from garden.formats.generate import generate

    folder = tmp_path_factory.mktemp("generated")
    path = folder / "fernhollow.jsonl"
    generate("fernhollow", GENERATED, 3, path)
    queries = []
    for case in sorted((folder / "cases" / "fernhollow").glob("*.yaml")):
        data = yaml.safe_load(case.read_text())
        for asked in [data, *data.get("controls", [])]:
            if "query" in asked:   # a control may change the story instead of the question
                queries.append((asked["query"], str(data["as_of"])))
    return path, queries


def _fresh_home(folder: Path, monkeypatch) -> None:
    """A new garden home, and a process that has made nothing of the story yet."""
    from garden.pipelines.indexes import PROCESS_INDEXES
    from garden.store.stored import OPENED
    from garden.pipelines.store_reference import PROCESS_REFERENCES

    monkeypatch.setenv("GARDEN_HOME", str(folder / ".garden"))
    PROCESS_INDEXES.clear()
    PROCESS_REFERENCES.clear()
    OPENED.clear()


def _asked(order: str, path: Path, queries, uri: str | None) -> dict[str, list[dict]]:
    """Each query's packet from the story in Milvus and from its file, asked in `order`."""
    from garden.store.milvus import ingest, stored_story

    ingest(path, uri=uri)
    stories = {"milvus": stored_story(path.stem), "file": load_story(path)}
    pipeline = "default@milvus-hybrid" + (f":uri={uri}" if uri else "")
    return {name: [api.query(stories[name], text, pipeline=pipeline, as_of=as_of) for text, as_of in queries]
            for name in order.split(",")}


def _release(folder: Path) -> None:
    if not MISSING:
        from milvus_lite.server_manager import server_manager_instance

        server_manager_instance.release_server(str(folder / ".garden" / "milvus" / "garden.db"))


@needs_milvus
@pytest.mark.parametrize("where", ["store", "server", "standalone"])
def test_a_stored_story_above_the_floor_decides_as_its_file_whichever_is_asked_first(where, request, generated,
                                                                                     tmp_path, monkeypatch):
    from garden.rerank.decide import GLOBAL_LEVEL

    uri = request.getfixturevalue(where) if where != "store" else None
    path, queries = generated
    assert len(queries) >= 10
    runs = {}
    for order in ("file,milvus", "milvus,file"):
        folder = tmp_path / order.replace(",", "-")
        _fresh_home(folder, monkeypatch)
        try:
            runs[order] = _asked(order, path, queries, uri)
        finally:
            _release(folder)
    truth = runs["file,milvus"]["file"]   # the file asked first in a fresh home: its own reference
    gates = [packet["gate"] for packet in truth if packet["gate"]]
    assert gates and all(g["reference"] and g["level"] != GLOBAL_LEVEL for g in gates)
    assert len({g["level"] for g in gates}) == 1
    assert any(packet["items"] for packet in truth) and any(g["answers"] for g in gates)
    for order, asked in runs.items():
        for name, packets in asked.items():
            for (text, _), packet, expected in zip(queries, packets, truth):
                assert packet["gate"] == expected["gate"], (order, name, text)
                assert packet["items"] == expected["items"], (order, name, text)
            assert packets == truth, (order, name)
