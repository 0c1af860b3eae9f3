"""A story that lives in Milvus: its records and their fields in collections, its small
tables in the garden, each query's candidates read by id.

`ingest` streams a JSON Lines story (garden.formats.jsonl_reader's form: a header line,
then one record a line) into Milvus without holding it whole:

1. the ids, read once: what a reference may name, and the duplicates;
2. the records, read a chunk at a time: each validated as `load_story` validates a story
   (the schema, then the cross-record rules of `semantic_errors` on the chunk with every
   id known, and the supersession cycles over the whole chain table), written to the
   records collection (its id and its record as JSON), and folded into the tables below;
3. each member of the base retriever (`milvus-hybrid`: `milvus-bm25` and `milvus-dense`)
   indexes the story's documents as it would a story in the garden, from the file read
   again (`index_stream`), never held. On a Milvus without BM25 (2.3) `milvus-hybrid`'s
   lexical member is `bm25` in the garden's process: it indexes the documents here and
   its index is saved beside the tables (`<story>.bm25.npz`).

What the stages read of the whole store is kept in the garden, folded in pass 2 and
saved under the garden home (arrays and JSON, `garden._state`): the story's own columns
(the ids and kinds, each record's size, the holders of each topic and entity, the latest
date the story names), every whole-store table a stage of the stage list declares
(`declared_tables`: each folded by the one fold the registry holds for it,
garden/derived/tables.py, and saved with its codec; no table is named here), and the
phrase index (garden.rerank._span_index, built from streamed chunks). The header (story,
project, topics, entities, addressee) is the manifest's.

`stored_story(name)` gives a `Story` whose records are never all in the process: its
`records` has their count but refuses to be read whole (`RecordsNotHeld`), and its tables
are those saved, read when first asked for (`StoredTables`); a table it was not given at
ingest is refused in one line naming the story and the table, never folded from nothing.
`by_id` reads a record from Milvus the first time it is asked for (`records_of` reads many
in one round trip, as the retrieve stage does), keeping the last `RECORDS_KEPT`. The
pipeline's base retriever attaches to the ingested collections (`IndexCache.retriever`),
and a member in the garden's process reads its saved index. The
phrase index and that saved index are read mapped (`garden._state.read_state`): checked
from their files, their pages in the process only when a query reads them, so what a
process holds of a million records is the ids and the small tables, not their indexes.
Milvus requires a vector field in every collection: the records collection's is a
one-value float vector (the record's place in the story; Milvus 2.3 has no sparse
vectors) that nothing searches. Embedded (the Milvus Lite store under the garden home) by
default; `uri` names a server, the same calls. Pushing the gate's rules down is not
offered on a stored story.
"""
from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import stat
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from garden._files import open_regular
from garden._state import State, read_state, write_state
from garden.derived.home import derived_folder, distrust, refuse_link, write_whole
from garden.store.stored import share_doc_ids
from garden.derived.tables import TABLES, Table
from garden.errors import GardenError, StoryError
from garden.formats.jsonl_reader import MAX_LINE_BYTES, SUFFIX, _parse
from garden.models import Record, Story
from garden.rerank.phrase import PhraseIndex
from garden.retrievers import Doc, id_order, make_retriever

# 4: the stages' declared tables, each saved by its codec; 3: the records collection's place a
# float vector (Milvus 2.3 has no sparse ones); 2: sessions
FORMAT = 4
RECORDS_FORMAT = 3   # the records collection's own: unchanged since 3, so an older one is found again
CHUNK = 10_000            # records validated and written at once
RECORDS_KEPT = 20_000     # records a stored story keeps after reading them from Milvus
SUFFIX_SAVED = ".npz"     # a saved table or index beside the manifest
KINDS = ("source", "chunk", "note", "view", "state", "decision", "control")
SEARCHED = ("id", "kind", "title", "text", "rationale")  # what `Record.searchable` is made of


# --- reading the file ---------------------------------------------------------------------

def _lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, value) of every non-blank line, one at a time."""
    with open_regular(path) as fh:
        n = 0
        while line := fh.readline(MAX_LINE_BYTES + 1):
            n += 1
            if len(line) > MAX_LINE_BYTES:
                raise GardenError(f"{path}:{n}: line is longer than {MAX_LINE_BYTES:,} bytes, the bound "
                                  "of one story line")
            if line.strip():
                yield n, _parse(line, f"{path}:{n}")


def _header(path: Path) -> dict:
    for n, value in _lines(path):
        if not isinstance(value, dict) or "records" in value:
            raise GardenError(f"{path}:{n}: the first line is the story's header, a JSON object "
                              "without records")
        return value
    raise GardenError(f"{path}: empty; a story's first line is its header")


def _raw_records(path: Path) -> Iterator[dict]:
    lines = _lines(path)
    next(lines, None)
    for n, value in lines:
        if not isinstance(value, dict):
            raise GardenError(f"{path}:{n}: a record must be a JSON object")
        yield value


def _documents(path: Path) -> Iterator[Doc]:
    """What every index of the story indexes (garden.pipelines.indexes.documents), streamed."""
    for raw in _raw_records(path):
        if raw.get("kind") != "control":
            # the fields `searchable` reads, validated as a record's (the story was checked whole)
            record = Record.model_validate({k: raw[k] for k in SEARCHED if k in raw})
            yield Doc(raw["id"], record.searchable)


# --- the tables ---------------------------------------------------------------------------

def declared_tables() -> list[Table]:
    """Every whole-store table a stage of the stage list reads (its `tables`), once each, in
    the stages' order: what a story in Milvus folds and saves."""
    from garden.rerank.stages import STAGES

    return list({t.name: t for stage in STAGES for t in stage.tables}.values())


class Tables:
    """What the stages read of the whole store, folded in record by record: the story's own
    columns, and each declared table by its own fold."""

    def __init__(self, header: Story, tables: list[Table]):
        self.ids: list[str] = []
        self.kinds: list[int] = []
        self.sizes: list[int] = []
        self.holders: dict[str, dict[str, list[int]]] = {"topics": {}, "entities": {}}
        self.documents = 0
        self.latest: dt.date | None = None
        self.folds = {t.name: t.fold(header) for t in tables}
        self._adds = [f.add for f in self.folds.values()]

    def add(self, record: Record) -> None:
        place = len(self.ids)
        self.ids.append(record.id)
        self.kinds.append(KINDS.index(record.kind))
        self.sizes.append(len(record.body))
        for d in (record.at, record.observed_at, record.decided_at, record.valid_from, record.last_confirmed_at):
            if d and (self.latest is None or d > self.latest):
                self.latest = d
        for add in self._adds:
            add(record)
        if record.kind == "control":
            return
        for field in ("topics", "entities"):
            for name in dict.fromkeys(getattr(record, field)):
                self.holders[field].setdefault(name, []).append(place)
        self.documents += 1

    def state(self) -> State:
        state = State(meta={"documents": self.documents, "latest": self.latest and self.latest.isoformat(),
                            "tables": list(self.folds)})
        state.put_strings("ids", self.ids)
        state.put("kinds", np.asarray(self.kinds, dtype=np.int8))
        state.put("sizes", np.asarray(self.sizes, dtype=np.int64))
        for field, by_name in self.holders.items():
            state.put_strings(f"{field}.names", list(by_name))
            state.put(f"{field}.counts", np.asarray([len(v) for v in by_name.values()], dtype=np.int64))
            state.put(f"{field}.places", np.asarray([p for v in by_name.values() for p in v], dtype=np.int64))
        for name, fold in self.folds.items():
            state.nest(f"table:{name}", TABLES[name].codec.save(fold.value()))
        control = KINDS.index("control")
        state.put("documents.order", id_order([rid for rid, kind in zip(self.ids, self.kinds) if kind != control]))
        return state


def _in_process(name: str) -> str:
    """A member in the garden's process, as the manifest names it."""
    return f"{name} in process"


def _settled(retriever):
    """`retriever` with the members its engine allows: `milvus-hybrid` on a Milvus without
    BM25 (2.3) stands on `bm25` in the garden's process (`MilvusHybrid.settle`)."""
    from garden.retrievers.milvus import MilvusHybrid

    if isinstance(retriever, MilvusHybrid):
        retriever.settle()
    return retriever


def _grouped(names: list[str], counts: np.ndarray, values: np.ndarray) -> dict[str, np.ndarray]:
    bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
    return {name: values[a:b] for name, a, b in zip(names, bounds, bounds[1:])}


# --- the story the stages see --------------------------------------------------------------

class _ByPlace(Mapping):
    """A mapping over the story's record ids (`_places`: id -> place in its arrays): `in`,
    `len` and iteration answer from the ids kept in the garden, never from Milvus."""

    _places: dict[str, int]

    def __contains__(self, rid: object) -> bool:
        return rid in self._places

    def __iter__(self):
        return iter(self._places)

    def __len__(self) -> int:
        return len(self._places)


class StoredRecords(_ByPlace):
    """Record id -> its Record, read from the records collection the first time it is asked
    for, the last RECORDS_KEPT kept; `in` and `len` answer from the ids kept in the garden."""

    def __init__(self, retriever, collection: str, places: dict[str, int]):
        self._retriever, self._collection, self._places = retriever, collection, places
        self._kept: OrderedDict[str, Record] = OrderedDict()

    def fetch(self, ids) -> dict[str, Record]:
        """The records `ids` (those the story holds), one round trip for those not kept."""
        wanted = [rid for rid in dict.fromkeys(ids) if rid in self._places]
        missing = [rid for rid in wanted if rid not in self._kept]
        if missing:
            for row in self._retriever._call("read records", "get", self._collection, ids=missing,
                                             output_fields=["id", "record"]):
                self._keep(Record.model_validate_json(row["record"]))
        out = {}
        for rid in wanted:
            if rid in self._kept:
                self._kept.move_to_end(rid)
                out[rid] = self._kept[rid]
        return out

    def _keep(self, record: Record) -> None:
        self._kept[record.id] = record
        while len(self._kept) > RECORDS_KEPT:
            self._kept.popitem(last=False)

    def __getitem__(self, rid: str) -> Record:
        found = self.fetch([rid]).get(rid)
        if found is None:
            raise KeyError(rid)
        return found


class _Column(_ByPlace):
    """Record id -> one value per record, read off an array by the record's place."""

    def __init__(self, places: dict[str, int], values, decode=None):
        self._places, self._values, self._decode = places, values, decode

    def __getitem__(self, rid: str):
        value = self._values[self._places[rid]]
        return self._decode(value) if self._decode else int(value)


class RecordsNotHeld(GardenError):
    """Something asked for every record of a story whose records live in Milvus."""


class NotHeld(Sequence):
    """A stored story's `records`: their count, never the records themselves (each is read
    by id); reading them whole is refused in one line naming the story."""

    def __init__(self, story: str, count: int):
        self._story, self._count = story, count

    def __len__(self) -> int:
        return self._count

    def _refuse(self):
        raise RecordsNotHeld(f"story {self._story} lives in Milvus: its records are read by id, never all at once")

    def __getitem__(self, n):
        self._refuse()

    def __iter__(self):
        self._refuse()


class DocumentIds:
    """The ids of a stored story's documents (its records but control ones, in story order):
    what a saved index of them checks (`encoded_ids`, `State.ids_of`) and reads (`ids`), one
    list of the story's own id strings that the indexes share, with its tie-breaking order
    and each id's position read through the story's id -> place map. Their texts live in
    Milvus: none is held here."""

    def __init__(self, ids: list[str], places: dict[str, int], rows: np.ndarray, order: np.ndarray):
        self.ids = [ids[row] for row in rows.tolist()]
        share_doc_ids(self.ids, order, lambda: places, rows, len(ids))

    def encoded_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """The ids as an index's save holds them (`State.put_strings`)."""
        found = self.__dict__.get("_encoded")
        if found is None:
            state = State()
            state.put_strings("ids", self.ids)
            found = self._encoded = (state.arrays["ids.utf8"], state.arrays["ids.offsets"])
        return found

    def __len__(self) -> int:
        return len(self.ids)


class StoredStory(Story):
    """A story whose records live in Milvus: `records` has their count and is never read
    whole (`NotHeld`); what the stages read of the whole store is the saved tables
    (`StoredTables`); a record is read by id (`by_id`, `records_of`)."""

    def records_of(self, ids) -> dict[str, Record]:
        return self.by_id.fetch(ids)

    @property
    def manifest(self) -> dict:
        return self.__dict__["_manifest"]

    def saved_phrase_index(self) -> PhraseIndex:
        return self.__dict__["_phrase"]

    def indexed_ids(self) -> DocumentIds:
        """The ids of what its indexes index, as a saved index checks them."""
        return self.__dict__["_indexed"]

    def attached(self, retriever, spec: str):
        """`retriever` (made by `spec`) on the collections this story was ingested into:
        each member attaches to its own, or GardenError naming what was ingested."""
        from garden.retrievers._milvus import _MilvusRetriever

        members = self.manifest["members"]
        for name, member in _settled(retriever).members().items():
            remote = isinstance(member, _MilvusRetriever)
            entry = members.get(member._layout() if remote else _in_process(name))
            if entry is None:
                raise GardenError(f"story {self.story} lives in Milvus and was ingested for "
                                  f"{self.manifest['retriever']}; pipeline retriever {spec} needs {name} as it "
                                  "was ingested (the same options; pushdown is not offered on a stored story)")
            if remote:
                member.attach(entry["collection"], entry["rows"])
            elif Path(str(entry.get("saved"))).name != entry.get("saved"):   # a name in the folder, no path
                raise GardenError(f"{_manifest_path(self.story)}: member {name} names no saved index of its "
                                  "own folder; ingest the story again")
            else:
                saved = _read_owned(_folder() / entry["saved"], f"retriever:{name}", type(member).__qualname__,
                                    mapped=True)
                member.load_state(saved, self.indexed_ids())
        return retriever


def _story(manifest: dict, tables: State, phrase: State, records_retriever) -> StoredStory:
    story = StoredStory.model_validate({**manifest["header"], "records": []})
    saved = StoredTables(story.name, manifest, tables, records_retriever)
    indexed = _indexed(tables, saved.ids, saved.places, saved.kinds)
    story.__dict__.update(records=NotHeld(story.name, len(saved.ids)), _saved=saved.read, _key=manifest["key"],
                          _indexed=indexed, _manifest=manifest, _phrase=PhraseIndex.from_state(phrase, indexed))
    return story


class StoredTables:
    """A stored story's tables (what `Story.remembered` reads of it, `read`): the story's own
    columns off the tables file's arrays, each table a stage declared by its codec from the
    same file, both when first asked for; anything else is made from those (a sitting's
    records from the sessions, the store's reference by running queries) and a table made
    from every record is refused in one line."""

    def __init__(self, name: str, manifest: dict, tables: State, records_retriever):
        self.name, self.manifest, self.tables = name, manifest, tables
        self.ids = tables.strings("ids")
        self.places = {rid: n for n, rid in enumerate(self.ids)}
        self.kinds = tables.array("kinds", "i", 1, len(self.ids))
        self.own = {"by_id": lambda: StoredRecords(records_retriever, manifest["records"], self.places),
                    "kinds": lambda: _Column(self.places, self.kinds, lambda code: KINDS[int(code)]),
                    "record_order": lambda: self.places,
                    "sizes": lambda: _Column(self.places, tables.array("sizes", "i", 1, len(self.ids))),
                    "holders_topics": lambda: self._holders("topics"),
                    "holders_entities": lambda: self._holders("entities"),
                    "latest_date": self._latest}

    def read(self, name: str, story: Story, build):
        own = self.own.get(name)
        if own is not None:
            return own()
        if name in TABLES:
            if name not in (self.tables.meta.get("tables") or ()):
                raise GardenError(f"{_folder() / f'{self.name}.tables.npz'}: story {self.name} in Milvus holds no "
                                  f"table {name} (a stage reads it that was not there at ingest); ingest the "
                                  "story again")
            return TABLES[name].codec.load(self.tables.inner(f"table:{name}"))
        try:
            return build(story)
        except RecordsNotHeld as exc:
            raise GardenError(f"{exc.messages[0]}; {name} is made from every record and was not saved at "
                              "ingest") from None

    def _holders(self, field: str) -> dict[str, tuple[str, ...]]:
        tables, ids = self.tables, self.ids
        grouped = _grouped(tables.strings(f"{field}.names"), tables.array(f"{field}.counts", "i"),
                           tables.positions(f"{field}.places", len(ids)))
        return {name: tuple(ids[p] for p in where.tolist()) for name, where in grouped.items()}

    def _latest(self):
        dates = [d for d in (self.tables.meta.get("latest"), self.manifest["header"].get("reviewed_at")) if d]
        return max(dt.date.fromisoformat(d) for d in dates) if dates else False


def _indexed(tables: State, ids: list[str], places: dict[str, int], kinds: np.ndarray) -> DocumentIds:
    rows = np.flatnonzero(kinds != KINDS.index("control"))
    return DocumentIds(ids, places, rows, tables.positions("documents.order", len(rows), len(rows)))


# --- ingest ---------------------------------------------------------------------------------

def _folder() -> Path:
    return derived_folder("stored")


def _manifest_path(name: str) -> Path:
    return _folder() / f"{name}.json"


def _validated(path: Path, header: dict, raws: list[dict], known: set[str]) -> list[Record]:
    """The chunk's records, checked as `load_story` checks a story (every id known)."""
    from garden.formats.stories import semantic_errors

    story = Story.model_validate({**header, "records": []})
    errors: list[str] = []
    records: list[Record] = []
    for raw in raws:
        try:
            records.append(Record.model_validate(raw))
        except ValueError as exc:
            from garden.formats.yaml_reader import describe_pydantic_error

            for err in getattr(exc, "errors", lambda: [])():
                field, message = describe_pydantic_error(err)
                errors.append(f"{path}: record {raw.get('id')!r}: field {field}: {message}")
    chunk = story.model_copy(update={"records": records})
    chunk.__dict__.pop("_by_id", None)
    errors += [e for e in semantic_errors(chunk, path, known) if "duplicate id" not in e]
    if errors:
        raise StoryError(errors[:20] + ([f"{path}: {len(errors) - 20} more problems not listed"]
                                        if len(errors) > 20 else []))
    return records


def _ids(path: Path) -> tuple[set[str], dict[str, str]]:
    """Every id (a duplicate refused) and the supersession table (for its cycles)."""
    seen: set[str] = set()
    chain: dict[str, str] = {}
    for raw in _raw_records(path):
        rid = raw.get("id")
        if isinstance(rid, str):
            if rid in seen:
                raise StoryError([f"{path}: record {rid!r}: field id: duplicate id {rid!r}"])
            seen.add(rid)
            if isinstance(raw.get("superseded_by"), str):
                chain[rid] = raw["superseded_by"]
    return seen, chain


def ingest(path: str | Path, retriever: str = "milvus-hybrid", uri: str | None = None) -> dict:
    """Stream the JSON Lines story at `path` into Milvus (the module's docstring): the
    records collection, each member's collection and the tables under the garden home.
    Returns what was done: the story, the records, the collections and the seconds each
    part took."""
    from types import SimpleNamespace

    from garden.formats.stories import _cycle_errors
    from garden.retrievers._milvus import _MilvusRetriever

    path = Path(path)
    if path.suffix != SUFFIX:
        raise GardenError(f"{path}: a story is ingested from JSON Lines ({SUFFIX}); `garden generate` writes one")
    timings: dict[str, float] = {}
    start = time.perf_counter()
    header = _header(path)
    if header.get("story") != path.stem:
        raise StoryError([f"{path}: field story: must equal the file stem {path.stem!r}"])
    known, chain = _ids(path)
    cycles = _cycle_errors(SimpleNamespace(records=[SimpleNamespace(id=a, superseded_by=b) for a, b in chain.items()]),
                           path)
    if cycles:
        raise StoryError(cycles)
    timings["ids_s"] = time.perf_counter() - start
    records = RecordsTable(uri)
    key = records.open(path, len(known))
    tables = Tables(Story.model_validate({**header, "records": []}), declared_tables())
    start = time.perf_counter()
    raws = _raw_records(path)
    while chunk := list(itertools.islice(raws, CHUNK)):
        batch = _validated(path, header, chunk, known)
        for record in batch:
            tables.add(record)
        records.insert(batch, len(tables.ids) - len(batch))
    records.finish()
    timings["records_s"] = time.perf_counter() - start
    start = time.perf_counter()
    phrase = PhraseIndex.streamed((d.id, d.text) for d in _documents(path))
    timings["phrase_s"] = time.perf_counter() - start
    made = _settled(make_retriever(retriever, **({"uri": uri} if uri else {})))
    members = {}
    folder = _folder()
    for name, member in made.members().items():
        start = time.perf_counter()
        if isinstance(member, _MilvusRetriever) and not member.pushes_down:
            member.index_stream(lambda: _documents(path))
            members[member._layout()] = {"collection": member.collection, "rows": member._rows,
                                         "inserted": member.inserted}
        elif not isinstance(member, _MilvusRetriever) and member.persist:
            # a member in the garden's process (bm25 where Milvus has no BM25): indexed here
            # and saved beside the tables, as the index cache saves it, and read back mapped
            member.index(list(_documents(path)))
            saved = f"{path.stem}.{name}{SUFFIX_SAVED}"
            write_whole(folder / saved, lambda out: write_state(out, f"retriever:{name}", type(member).__qualname__,
                                                                member.state()))
            members[_in_process(name)] = {"saved": saved, "rows": len(member.ids), "inserted": 0}
        else:
            raise GardenError(f"retriever {retriever}: a stored story needs Milvus members without pushdown, or "
                              f"members in the garden's process that save their index ({name} is neither)")
        timings[f"{name}_s"] = time.perf_counter() - start
    header_only = {k: v for k, v in header.items() if k != "records"}
    manifest = {"format": FORMAT, "key": key, "source": str(path.resolve()), "uri": uri, "retriever": retriever,
                "header": header_only, "records": records.name, "rows": len(tables.ids), "members": members}
    write_whole(folder / f"{path.stem}.tables.npz",
                lambda out: write_state(out, "stored:tables", "Tables", tables.state()))
    write_whole(folder / f"{path.stem}.phrase.npz",
                lambda out: write_state(out, "phrase", "PhraseIndex", phrase.state()))
    write_whole(_manifest_path(path.stem), lambda out: out.write(json.dumps(manifest, indent=1).encode()))
    return {"story": path.stem, "records": len(tables.ids), "documents": tables.documents,
            "collections": {"records": records.name, **{k: v["collection"] for k, v in members.items()
                                                         if "collection" in v}},
            "saved": {k: v["saved"] for k, v in members.items() if "saved" in v},
            "inserted": {"records": records.inserted, **{k: v["inserted"] for k, v in members.items()}},
            "timings": {k: round(v, 3) for k, v in timings.items()}}


class RecordsTable:
    """The records collection: each record's id and its JSON, named by the file's content;
    reached through the Milvus retrievers' connection, faults and owner-only store."""

    def __init__(self, uri: str | None):
        from garden.retrievers._milvus import _MilvusRetriever

        class _Records(_MilvusRetriever):   # the connection and the one-line faults, nothing searched
            field, metric = "place", "IP"

            def family(self):
                return "records"

        self.client = _Records("records", uri, 600.0, 1)
        self.name = ""
        self.inserted = 0
        self._batch: list[dict] = []

    def open(self, path: Path, rows: int) -> str:
        """Name the collection by the file's bytes; build it unless it is there. The key."""
        import hashlib

        digest = hashlib.sha256(b"garden story, json lines\n")
        with open_regular(path) as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        key = digest.hexdigest()
        self.name = f"garden_records_s{RECORDS_FORMAT}_{key[:16]}"
        client = self.client
        client.collection = self.name
        milvus = client._connect()
        self.existing = client._call("list collections", "has_collection", self.name)
        if self.existing:
            stats = client._call("check the collection", "get_collection_stats", self.name)
            self.existing = int(stats.get("row_count", -1)) == rows
            if not self.existing:
                client._call("drop a damaged collection", "drop_collection", self.name)
        if not self.existing:
            from pymilvus import DataType

            with client._rpc("create the collection"):
                schema = milvus.create_schema(auto_id=False, enable_dynamic_field=False)
                schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=65535)
                schema.add_field("record", DataType.VARCHAR, max_length=65535)
                schema.add_field("place", DataType.FLOAT_VECTOR, dim=1)
            client._call("create the collection", "create_collection", self.name, schema=schema)
        return key

    def insert(self, records: list[Record], first: int) -> None:
        if self.existing:
            return
        rows = []
        for n, record in enumerate(records, start=first):
            text = record.model_dump_json(exclude_defaults=True)
            if len(text.encode("utf-8")) > 65535:
                raise GardenError(f"record {record.id}: longer than Milvus's 65535-byte VARCHAR as JSON; "
                                  "it cannot be stored in Milvus")
            rows.append({"id": record.id, "record": text, "place": [float(n)]})
        for start in range(0, len(rows), 1000):
            self.client._call("insert records", "insert", self.name, rows[start:start + 1000])
        self.inserted += len(rows)

    def finish(self) -> None:
        client = self.client
        if not self.existing:
            client._call("flush the collection", "flush", self.name)
            with client._rpc("index the collection"):
                params = client._client.prepare_index_params()
                params.add_index(field_name="place", index_type="FLAT", metric_type="L2")
            client._call("index the collection", "create_index", self.name, params)
        client._call("load the collection", "load_collection", self.name)
        if client._store is not None:
            from garden.retrievers._milvus import _owner_only

            _owner_only(client._store)


# --- opening one ------------------------------------------------------------------------------

def _read_owned(path: Path, kind: str, type_name: str, mapped: bool = False) -> State:
    """The save at `path`, read only when it is this user's and no one else's to change;
    `mapped`: its large arrays mapped, not read into the process (`read_state`)."""
    refuse_link(path)
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        problem = distrust(st) or (None if stat.S_ISREG(st.st_mode) else "not a regular file")
        if problem is not None:
            raise GardenError(f"{path}: not read: {problem} (the garden writes it 0600 for this user); "
                              "ingest the story again")
        return read_state(fh, kind, type_name, mapped=mapped)


def stored_story(name: str, uri: str | None = None) -> StoredStory:
    """The story `name` as `ingest` left it in Milvus (at `uri`, else where it was ingested)."""
    path = _manifest_path(name)
    try:
        refuse_link(path)
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise GardenError(f"story {name}: not ingested into Milvus under this garden home ({path}); "
                          "run garden.store.milvus.ingest on its .jsonl first") from None
    except (OSError, ValueError) as exc:
        raise GardenError(f"{path}: not a stored story's manifest ({exc}); ingest the story again") from None
    if manifest.get("format") != FORMAT:
        raise GardenError(f"{path}: written by another version of the garden; ingest the story again")
    declared_tables()   # the stages registered: the codecs of the tables the file holds
    tables = _read_owned(_folder() / f"{name}.tables.npz", "stored:tables", "Tables")
    phrase = _read_owned(_folder() / f"{name}.phrase.npz", "phrase", "PhraseIndex", mapped=True)
    records = RecordsTable(uri or manifest.get("uri"))
    records.client.collection = manifest["records"]
    records.client._connect()
    records.client._call("load the collection", "load_collection", manifest["records"])
    return _story(manifest, tables, phrase, records.client)
