"""A story that lives in Milvus (garden.store.milvus): ingested from JSON Lines, its
records read by id, its tables saved owner-only in the garden; it serves the packets the
same story serves from its file, embedded and on a server."""
from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from garden import api
from garden.errors import GardenError, StoryError
from garden.formats.stories import load_story
from test_milvus import MISSING, needs_milvus, server  # noqa: F401  (the server fixture)

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
    assert isinstance(stored, StoredStory) and stored.records == [] and len(stored.by_id) == 48
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
