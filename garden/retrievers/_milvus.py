"""The engine side of the Milvus retrievers (milvus.py): reaching Milvus, one collection
per story and family, built once and found again, searches, and the faults, each one
GardenError line naming the URI and what to do."""
from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import shutil
import stat
import threading
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence


from garden._notice import warn
from garden.derived.home import derived_folder, distrust
from garden.errors import GardenError
from garden.retrievers import (Doc, Eligible, RecordFields, RetrieverBase, boolean, check_depth, custom, integer,
                               number, rank)

SCHEMA = 1  # the collections' layout: a change gives every collection another name
INSTALL_HINT = "pip install -e '.[milvus]'"
SERVER_HINT = "milvus-lite server --data-dir DIR --host 127.0.0.1 --port 19530"
BM25_SINCE = (2, 5)  # the first Milvus server release with a BM25 function and sparse vectors
DEFAULT_TIMEOUT = 10.0  # seconds: connecting and each query's round trip
BUILD_TIMEOUT = 600.0  # seconds, at least, for each call that builds a collection (insert, flush, index, load)
MAX_LIMIT = 16384  # Milvus's largest top-k: a search ranks at most this many records (the `limit` option's default)
MAX_VARCHAR = 65535  # Milvus's longest VARCHAR, in bytes
QUERIES_PER_SEARCH = 64  # queries sent in one search request by the batch paths
INSERT_ROWS, INSERT_BYTES = 1000, 16 * 1024**2  # one insert request holds at most these
TIE_MARGIN = 32  # a ranking to k asks for k + this, so ties at the k-th place are all seen
STALE_BUILD = 3600  # seconds: a temporary collection older than this is an interrupted build
K1, B = 1.5, 0.75  # `bm25`'s defaults, set explicitly (Milvus itself defaults k1 to 1.2)

# pymilvus pings an idle connection every 10 s; a gRPC server's default policy (Milvus Lite's,
# embedded or `milvus-lite server`) allows one ping in 5 minutes without data and answers
# more with GOAWAY "too_many_pings", which broke the next connection to the same server after
# a long pause of this process (a store's first encoding: `garden compare` on Vaswani, cold)
GRPC_OPTIONS = {"grpc.keepalive_time_ms": 300_000, "grpc.keepalive_permit_without_calls": 0}

# what this process did, by "<retriever>:built", ":reused", ":rows inserted", ":dropped"
COUNTS: Counter = Counter()

URI_WORDS = "a Milvus server's address (http://HOST:PORT) or a Milvus Lite store's path ending in .db"
_SERVER_URI = re.compile(r"(?i)(?:https?|tcp)://[^\s/:@]+(?::[0-9]{1,5})?(?:/[A-Za-z0-9_]*)?")
_QUIET = ("pymilvus", "pymilvus.milvus_client", "pymilvus.bulk_writer", "milvus_lite")


def _uri(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("not text")
    text = value.strip()
    if _SERVER_URI.fullmatch(text) or (text.endswith(".db") and "://" not in text and len(text) > 3):
        return text
    raise ValueError("not a Milvus URI")


# where the engine is and how long to wait for it: the options every Milvus retriever takes
ENGINE_OPTIONS = {"uri": custom(URI_WORDS, _uri, _uri), "timeout": number(0, above=True),
                  "limit": integer(1, MAX_LIMIT), "pushdown": boolean()}
# the scalar fields a `pushdown` collection carries: RecordFields', each typed as its default is
RECORD_FIELDS = {name: {str: "VARCHAR", bool: "BOOL", int: "INT64"}[type(default)]
                 for name, default in RecordFields._field_defaults.items()}


def _is_local(uri: str | None) -> bool:
    return uri is None or "://" not in uri


LITE = "milvus_lite"  # how Milvus Lite names itself, embedded or as `milvus-lite server` (milvus_lite-3.2.2)
_VERSIONS: dict[str, str] = {}  # what each server URI reported, once per process


def release(version: str) -> tuple[int, ...] | None:
    """A Milvus server's release as numbers (`v2.3.5-lite` -> (2, 3, 5)); None for Milvus
    Lite (`milvus_lite-3.2.2`) or a version it cannot read."""
    found = None if version.startswith(LITE) else re.match(r"v?([0-9]+)\.([0-9]+)(?:\.([0-9]+))?", version)
    return tuple(int(part) for part in found.groups("0")) if found else None


def builds_indexes(version: str) -> bool:
    """Whether the engine builds the index a collection asks for: every Milvus server does;
    Milvus Lite walks every row on every search, whatever index it is given."""
    return not version.startswith(LITE)


def has_bm25(version: str) -> bool:
    """Whether the engine has a BM25 Function and sparse vectors: Milvus Lite, and Milvus
    servers from 2.5 (2.3 accepts a schema with a BM25 Function and searches nothing)."""
    found = release(version)
    return version.startswith(LITE) or (found is not None and found[:2] >= BM25_SINCE)


def _missing_packages(uri: str | None) -> list[str]:
    missing = [] if importlib.util.find_spec("pymilvus") else ["pymilvus"]
    if _is_local(uri) and not importlib.util.find_spec("milvus_lite"):
        missing.append("milvus-lite")
    return missing


_HELD: dict[str, list] = {}  # a process-wide setting's name -> [threads inside its blocks, what it was before]
_HELD_LOCK = threading.Lock()


@contextmanager
def _held(name: str, change: Callable[[], Any], restore: Callable[[Any], None]) -> Iterator[None]:
    """A process-wide setting changed for a block that threads may be inside at once (a
    hybrid's members search in threads of their own): `change()` when the first enters,
    `restore(what it gave)` when the last leaves, so it is put back once, as it was before
    any of them, and never to a value another thread set."""
    with _HELD_LOCK:
        held = _HELD.setdefault(name, [0, None])
        if not held[0]:
            held[1] = change()
        held[0] += 1
    try:
        yield
    finally:
        with _HELD_LOCK:
            held[0] -= 1
            if not held[0]:
                restore(held[1])


def _silence() -> list[int]:
    loggers = [logging.getLogger(name) for name in _QUIET]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    return levels


def _unsilence(levels: list[int]) -> None:
    for name, level in zip(_QUIET, levels):
        logging.getLogger(name).setLevel(level)


def _quiet():
    """pymilvus logs every failed call (with a traceback) and an in-process Milvus Lite logs
    its own: while a call runs they are silenced, and the failure becomes one line."""
    return _held("quiet", _silence, _unsilence)


def _private_umask():
    """Files and folders made in the block are owner-only (umask 077; process-wide while it lasts)."""
    return _held("umask", lambda: os.umask(0o077), os.umask)


_POOL: list = []  # the threads a hybrid's members search in (`_searching`), made on first use


def _searching():
    """The process's pool of threads for Milvus searches that overlap others (two: a
    hybrid has two members)."""
    with _HELD_LOCK:
        if not _POOL:
            from concurrent.futures import ThreadPoolExecutor

            _POOL.append(ThreadPoolExecutor(max_workers=2, thread_name_prefix="milvus-search"))
    return _POOL[0]


def _untrusted_store(path: Path) -> str | None:
    """Why the Milvus Lite store at `path` may not be read (another user's, or others may
    write it or a folder in it), or None (absent, or the user's own and nobody else's to
    change). Read bits others hold are taken away when the store is opened (`_owner_only`):
    what others could read is a leak to stop, not a change to distrust."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    for folder, dirs, files in os.walk(path):
        for name in [None, *files]:
            entry = Path(folder) if name is None else Path(folder, name)
            try:
                st = os.lstat(entry)
            except OSError:
                continue
            writable = st.st_mode & 0o022 and not stat.S_ISLNK(st.st_mode)
            problem = distrust(st) if writable or st.st_uid != os.geteuid() else None
            if problem is not None:
                return f"{entry}: {problem}"
    return None


def _owner_only(root: Path) -> None:
    """Group and other bits off everything under `root`: the garden home is owner-only
    (`garden doctor` enforces it) and Milvus Lite writes with the process's umask."""
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files, None]:
            path = Path(folder) if name is None else Path(folder, name)
            try:
                st = os.lstat(path)
                if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o077:
                    os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o077)
            except OSError:
                pass


def _sha(*parts: str):
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8"))
        digest.update(b"\x00")
    return digest


def _clip(text: str, limit: int = MAX_VARCHAR) -> str:
    """`text` cut to at most `limit` UTF-8 bytes, on a character boundary."""
    data = text.encode("utf-8")
    return text if len(data) <= limit else data[:limit].decode("utf-8", "ignore")


class _MilvusRetriever(RetrieverBase):
    """What the Milvus retrievers share: the connection, the collection's life, the search
    round trip and the one-line faults. A subclass says what a collection holds (`family`,
    `identity`, `schema`, `index_params`, `rows`), what a query is (`_queries`) and how a
    record's score is read without a search (`scores_of`)."""

    in_contrast = False  # the same rankings on another engine: named where wanted, not a matrix column
    top_only = True  # a pipeline's search returns its best `depth` records: Milvus is the search engine

    field = ""  # the field searched
    metric = ""

    def __init__(self, name: str, uri: str | None, timeout: float, limit: int, pushdown: bool = False):
        self.name = name
        missing = _missing_packages(uri)
        if missing:
            where = "" if "pymilvus" in missing else " for a local store (or give uri=http://HOST:PORT)"
            raise GardenError(f"retriever {name}: needs {' and '.join(missing)}{where}; install with `{INSTALL_HINT}`")
        self.uri = uri
        self.timeout = float(timeout)
        self.limit = int(limit)
        self.pushdown = bool(pushdown)
        self._fields: dict[str, RecordFields] = {}  # by id, when pushdown: what the filter reads
        self.ids: list[str] = []
        self.collection: str | None = None
        self.inserted = 0  # rows this retriever inserted (0 when it found its collection)
        self.build_s: dict[str, float] = {}  # seconds of the last build's phases: insert, flush, index, load
        self._rows = 0
        self._client = None
        self._store: Path | None = None  # the local store's folder, when the garden home holds it
        self._last: tuple[tuple, dict[str, float]] | None = None
        self._text: dict[str, str] = {}  # id -> the text indexed: what `scores_of` reads of a record
        self._ids: list[str] = []  # each id once, in the order indexed

    # --- where -----------------------------------------------------------------------

    @property
    def where(self) -> str:
        """The URI as errors show it."""
        if self.uri is not None:
            return self.uri
        return str(self._store) if self._store is not None else "the Milvus Lite store under the garden home"

    def engine(self) -> str:
        """The engine's version as it reports it (`milvus_lite-3.2.2`, `v2.3.5-lite`):
        a local store is Milvus Lite without asking; a server is asked once per process.
        What a collection is built as, and whether BM25 is there, follow from it."""
        if _is_local(self.uri):
            return LITE
        if self.uri not in _VERSIONS:
            self._connect()
            _VERSIONS[self.uri] = str(self._call("connect", "get_server_version"))
        return _VERSIONS[self.uri]

    def _target(self) -> str:
        if self.uri is None:
            self._store = derived_folder("milvus") / "garden.db"
            problem = _untrusted_store(self._store)
            if problem is not None:   # derived, under the home: rebuilt rather than read
                warn(f"{self._store}: Milvus Lite store not used: {problem}; removed, built anew (owner-only)")
                shutil.rmtree(self._store, ignore_errors=True)
            return str(self._store)
        if _is_local(self.uri):
            path = Path(self.uri).expanduser().absolute()
            problem = _untrusted_store(path)
            if problem is not None:
                raise GardenError(f"retriever {self.name}: uri {path}: {problem}; a Milvus Lite store is read "
                                  "only when it is this user's and private: remove it, or name another path")
            try:
                with _private_umask():
                    path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise GardenError(f"retriever {self.name}: {path.parent}: cannot create the folder for the Milvus "
                                  f"Lite store: {exc.strerror or exc}") from None
            self._store = path
            return str(path)
        return self.uri

    # --- faults ----------------------------------------------------------------------

    def _fault(self, what: str, exc: BaseException) -> GardenError:
        text = " ".join(str(getattr(exc, "message", None) or exc).split())[:300]
        low = text.lower()
        who = f"retriever {self.name}"
        if isinstance(exc, ImportError):
            return GardenError(f"{who}: the Milvus client does not import ({text}); reinstall with `{INSTALL_HINT}`")
        if _is_local(self.uri) and "open local milvus failed" in low:
            return GardenError(
                f"{who}: cannot open the Milvus Lite store {self.where}: another process has it open (Milvus Lite "
                f"serves a store to one process at a time) or it is not a Milvus Lite store; serve it with "
                f"`milvus-lite server --data-dir {self.where} --host 127.0.0.1 --port 19530` and give "
                f"uri=http://127.0.0.1:19530, or wait for the other process")
        if any(word in low for word in ("deadline", "timeout", "timed out")):
            return GardenError(f"{who}: Milvus at {self.where} did not answer ({what}) within "
                               f"{self._wait(what):g} s; check the server, or raise the timeout option "
                               f"({self.name}:timeout=60)")
        if any(word in low for word in ("fail connecting", "unavailable", "connection refused", "failed to connect")):
            return GardenError(f"{who}: cannot reach Milvus at {self.where} ({text}); start a server "
                               f"(`{SERVER_HINT}`, installed by `{INSTALL_HINT}`) or check the uri option")
        if self.collection and ("not exist" in low or "not found" in low):
            return GardenError(f"{who}: collection {self.collection} is missing at {self.where} (dropped by "
                               f"another process, or the server's data folder changed); run again to rebuild it")
        if self.collection and ("released" in low or "not loaded" in low or "load()" in low):
            return GardenError(f"{who}: collection {self.collection} is not loaded at {self.where} (the server "
                               f"restarted?); run again to load it")
        return GardenError(f"{who}: Milvus at {self.where}: {what} failed ({text}); check the server and the uri "
                           f"option, or run again to rebuild the collection")

    def _wait(self, what: str) -> float:
        return self.timeout if what in ("connect", "search") else max(self.timeout, BUILD_TIMEOUT)

    @contextmanager
    def _rpc(self, what: str) -> Iterator[None]:
        try:
            # Milvus Lite writes its files in this process as the calls run: owner-only
            with _quiet(), _private_umask():
                yield
        except GardenError:
            raise
        except Exception as exc:  # whatever pymilvus or grpc raised: one line, never a traceback
            raise self._fault(what, exc) from None

    def _call(self, what: str, method: str, *args, **kwargs):
        with self._rpc(what):
            return getattr(self._client, method)(*args, timeout=self._wait(what), **kwargs)

    def _connect(self):
        if self._client is None:
            target = self._target()
            with self._rpc("connect"):
                from pymilvus import MilvusClient

                # Milvus Lite makes its files with the umask of the process that opens the store:
                # owner-only from the start (the store holds record text, private records included)
                with _private_umask():
                    self._client = MilvusClient(uri=target, timeout=self.timeout, grpc_options=GRPC_OPTIONS)
            if self._store is not None:
                _owner_only(self._store)
        return self._client

    # --- what a collection is --------------------------------------------------------

    def family(self) -> str:
        """The kind and options a collection is built with, as a name part."""
        raise NotImplementedError

    def _layout(self) -> str:
        # a collection with the record fields is another collection than one without
        return self.family() + ("_fields" if self.pushdown else "")

    # --- pushing the hard eligibility rules down -------------------------------------------

    @property
    def pushes_down(self) -> bool:
        """With `pushdown=true`: each record's `RecordFields` are stored beside it as scalar
        fields, and a pipeline's search carries the query's hard rules as a Milvus filter."""
        return self.pushdown

    def describe_records(self, fields) -> None:
        self._fields = dict(fields)

    def _record_fields(self, rid: str) -> RecordFields:
        # a record the pipeline did not describe (a corpus document) is there from the start
        return self._fields.get(rid) or RecordFields()

    @staticmethod
    def filter_for(eligible: Eligible) -> str:
        """The Milvus boolean expression `Eligible.admits` is: the hard rules as a filter."""
        day = int(eligible.as_of.toordinal())
        rules = [] if eligible.include_private else ["private == false"]
        rules += [f"appeared <= {day}", f"live_from <= {day}", f"live_until > {day}"]
        return " and ".join(rules)

    def components(self, query: str, eligible: Eligible | None = None,
                   depth: int | None = None) -> dict[str, dict[str, float]]:
        """Its own scores for `query`: of its best `depth` records when a pipeline gives its
        candidate depth (one search, `depth` hits, ties by id), else of every record it
        ranks, up to `limit`; with `eligible` (given only when `pushes_down`), of the
        records the query's hard rules admit, filtered in Milvus."""
        where = self.filter_for(eligible) if eligible is not None and self.pushdown else ""
        if depth is None:
            return {self.name: self._memo(query, where)}
        check_depth(depth)
        key = (query, where, depth)
        if self._last is None or self._last[0] != key:
            self._last = (key, dict(self._top_of([query], depth, where)[0]))
        return {self.name: self._last[1]}

    def _admitted(self, ids: Sequence[str], eligible: Eligible | None) -> list[str]:
        """The records of `ids` the query's hard rules admit, when pushed down; else all."""
        if eligible is None or not self.pushdown:
            return list(ids)
        return [rid for rid in ids if eligible.admits(self._record_fields(rid))]

    def _stored(self, ids: Sequence[str], field: str) -> dict[str, Any]:
        """`field` of the records `ids` that the collection holds, read by id (one round
        trip): what `scores_of` reads of a record whose text this process does not hold."""
        if self.collection is None or not ids:
            return {}
        found = self._call("search", "get", self.collection, ids=list(ids), output_fields=["id", field])
        return {str(row["id"]): row[field] for row in found}

    def _statistics(self, open_docs, count):
        """The story's term statistics: saved beside the collection, else `count(texts)`
        of its records (once per collection, then saved)."""
        from garden.retrievers import _term_stats

        if self.collection is None:
            return _term_stats.TermStatistics()
        found = _term_stats.load(self.collection)
        if found is None or found.documents != self._rows:
            if open_docs is None:
                raise GardenError(f"retriever {self.name}: the term statistics of {self.collection} are missing "
                                  "from the garden home; ingest the story again")
            seen: set[str] = set()
            found = count(d.text for d in open_docs() if not (d.id in seen or seen.add(d.id)))
            _term_stats.save(self.collection, found)
        return found

    def identity(self) -> list[str]:
        """What else its content depends on (a model release, parameters)."""
        return []

    def schema(self, client):
        raise NotImplementedError

    def index_params(self, client):
        raise NotImplementedError

    def rows(self, docs: Iterable[Doc]) -> Iterator[dict]:
        """The rows to insert, one per record (ids already unique), as `docs` are read."""
        raise NotImplementedError

    def _names(self, docs: Iterable[Doc]) -> tuple[str, str, str]:
        """(the collection's name, the id set's hash, the content's hash), in one pass over
        `docs`, each checked; their ids are kept (`_ids`, `_rows`)."""
        content = _sha(str(SCHEMA), self._layout(), *self.identity())
        seen: set[str] = set()
        self._ids = []
        for doc in docs:
            if doc.id in seen:
                continue
            seen.add(doc.id)
            self._ids.append(doc.id)
            self._check_doc(doc)
            content.update(doc.id.encode("utf-8") + b"\x00" + doc.text.encode("utf-8") + b"\x01")
            if self.pushdown:
                content.update(repr(tuple(self._record_fields(doc.id))).encode("utf-8") + b"\x02")
        self._rows = len(self._ids)
        id_set = _sha(*sorted(seen)).hexdigest()[:12]
        digest = content.hexdigest()[:16]
        return f"garden_{self._layout()}_s{SCHEMA}_{id_set}_{digest}", id_set, digest

    def _check_doc(self, doc: Doc) -> None:
        if len(doc.id.encode("utf-8")) > MAX_VARCHAR:
            raise GardenError(f"retriever {self.name}: record {doc.id[:60]!r}...: an id longer than "
                              f"{MAX_VARCHAR} bytes cannot be a Milvus primary key")

    # --- indexing --------------------------------------------------------------------

    def index(self, docs: Sequence[Doc]) -> None:
        self._text = {}
        for doc in docs:
            self._text.setdefault(doc.id, doc.text)
        self._index(lambda: [Doc(rid, text) for rid, text in self._text.items()], docs)

    def index_stream(self, open_docs: Callable[[], Iterable[Doc]]) -> None:
        """Index the documents `open_docs()` yields, read twice (to name the collection,
        then to insert) and never held: a story ingested into Milvus (garden.store.milvus).
        Each id once. A record's text is read back from Milvus when a pipeline needs it."""
        self._text = {}
        self._index(open_docs, None)

    def _check_engine(self) -> None:
        """Refuse, in one line, an engine that cannot hold this retriever's collection."""

    def _index(self, open_docs: Callable[[], Iterable[Doc]], given: Sequence[Doc] | None) -> None:
        self._check_engine()
        self._last = None
        self.inserted = 0
        self.collection = None
        name, id_set, digest = self._names(open_docs())
        self.ids = [d.id for d in given] if given is not None else list(self._ids)
        if not self._rows:
            return  # nothing to search: no collection, every query scores nothing
        client = self._connect()
        self.collection = name
        self._publish(client, name, id_set, digest, open_docs)
        if self._store is not None:
            _owner_only(self._store)
        self._indexed(open_docs)

    def _indexed(self, open_docs: Callable[[], Iterable[Doc]]) -> None:
        """What a retriever keeps of the story once its collection is there (nothing by default)."""

    def attach(self, collection: str, rows: int) -> None:
        """Search the collection `collection` of `rows` records, ingested before (a story
        in Milvus, garden.store.milvus), without its documents: checked and loaded."""
        self._check_engine()
        self._text, self.ids, self._rows, self._last, self.inserted = {}, [], rows, None, 0
        self.collection = collection
        self._connect()
        if not self._call("list collections", "has_collection", collection):
            raise GardenError(f"retriever {self.name}: collection {collection} is missing at {self.where}; "
                              "ingest the story again")
        self._call("load the collection", "load_collection", collection)
        self._indexed(None)

    def _properties(self, id_set: str, digest: str) -> dict[str, str]:
        return {"garden.schema": str(SCHEMA), "garden.family": self._layout(), "garden.ids": id_set,
                "garden.content": digest, "garden.rows": str(self._rows)}

    def _intact(self, name: str, id_set: str, digest: str) -> bool:
        """Whether the collection `name` holds this story's rows as this schema lays them out."""
        stats = self._call("check the collection", "get_collection_stats", name)
        described = self._call("check the collection", "describe_collection", name)
        properties = {k: str(v) for k, v in (described.get("properties") or {}).items()}
        fields = {f.get("name") for f in described.get("fields", [])}
        wanted = self._properties(id_set, digest)
        return (int(stats.get("row_count", -1)) == self._rows and all(properties.get(k) == v for k, v in wanted.items())
                and {"id", "text", self.field, *(RECORD_FIELDS if self.pushdown else ())} <= fields)

    def _drop_stale(self, names: list[str], name: str, id_set: str) -> None:
        """Drop the other collections of this family and id set: older contents, older
        schemas, builds interrupted more than STALE_BUILD seconds ago."""
        from garden.retrievers import _term_stats

        mine = re.compile(rf"garden_{re.escape(self._layout())}_s[0-9]+_{id_set}_[0-9a-f]{{16}}(?:_t([0-9]+)_[0-9]+)?")
        now = time.time()
        for other in names:
            found = mine.fullmatch(other)
            if found is None or other == name:
                continue
            if found.group(1) is not None and now - int(found.group(1)) < STALE_BUILD:
                continue  # another process may be building it now
            self._call("drop a stale collection", "drop_collection", other)
            _term_stats.forget(other)
            COUNTS[f"{self.name}:dropped"] += 1

    def _publish(self, client, name: str, id_set: str, digest: str, open_docs) -> None:
        names = list(self._call("list collections", "list_collections"))
        self._drop_stale(names, name, id_set)
        if name in names:
            if self._intact(name, id_set, digest):
                self._call("load the collection", "load_collection", name)
                COUNTS[f"{self.name}:reused"] += 1
                return
            warn(f"{self.where}: collection {name} is not the garden's or is incomplete; dropped, rebuilding")
            self._call("drop a damaged collection", "drop_collection", name)
        temporary = f"{name}_t{int(time.time())}_{os.getpid()}"
        self.build_s = {}
        self._build(client, temporary, id_set, digest, open_docs)
        try:
            self._call("publish the collection", "rename_collection", temporary, name)
        except GardenError:
            # another process published the same content first: use theirs
            if not self._call("list collections", "has_collection", name):
                raise
            self._call("drop a temporary collection", "drop_collection", temporary)
        with self._phase("load"):
            self._call("load the collection", "load_collection", name)
        COUNTS[f"{self.name}:built"] += 1

    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        """Time a phase of a build into `build_s` (a figure for a report, never an input)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.build_s[name] = self.build_s.get(name, 0.0) + time.perf_counter() - start

    def _build(self, client, name: str, id_set: str, digest: str, open_docs) -> None:
        with self._rpc("create the collection"):
            schema = self.schema(client)
            if self.pushdown:
                from pymilvus import DataType

                for field, type_name in RECORD_FIELDS.items():
                    extra = {"max_length": MAX_VARCHAR} if type_name == "VARCHAR" else {}
                    schema.add_field(field, getattr(DataType, type_name), **extra)
            params = self.index_params(client)
        self._call("create the collection", "create_collection", name, schema=schema,
                   properties=self._properties(id_set, digest))
        batch: list[dict] = []
        size = 0
        seen: set[str] = set()
        unique = (d for d in open_docs() if not (d.id in seen or seen.add(d.id)))
        for row in self.rows(unique):
            if self.pushdown:
                row.update(self._record_fields(row["id"])._asdict())
            batch.append(row)
            size += len(row["text"]) * 4 + 4 * len(row.get("vector", ())) + len(row["id"])
            if len(batch) >= INSERT_ROWS or size >= INSERT_BYTES:
                self._insert(name, batch)
                batch, size = [], 0
        if batch:
            self._insert(name, batch)
        # one flush after every insert: Milvus Lite keeps BM25's statistics per segment, so
        # the whole story goes into one
        with self._phase("flush"):
            self._call("flush the collection", "flush", name)
        with self._phase("index"):
            self._call("index the collection", "create_index", name, params)

    def _insert(self, name: str, batch: list[dict]) -> None:
        with self._phase("insert"):
            self._call("insert records", "insert", name, batch)
        self.inserted += len(batch)
        COUNTS[f"{self.name}:rows inserted"] += len(batch)

    # --- searching -------------------------------------------------------------------

    def _queries(self, queries: list[str]) -> list:
        """What is sent for each query: its text, or its vector."""
        raise NotImplementedError

    def _score(self, distance: float) -> float:
        return float(distance)

    def search_params(self, limit: int) -> dict:
        """What a search of `limit` hits asks of the collection's index."""
        return {"metric_type": self.metric}

    def _search(self, data: list, limit: int, where: str = "") -> list[list[tuple[str, float]]]:
        """One round trip per QUERIES_PER_SEARCH queries: each query's hits, as Milvus gives
        them, of the records the filter `where` admits (every record when empty)."""
        out: list[list[tuple[str, float]]] = []
        for start in range(0, len(data), QUERIES_PER_SEARCH):
            chunk = data[start:start + QUERIES_PER_SEARCH]
            result = self._call("search", "search", self.collection, data=chunk, anns_field=self.field,
                                limit=limit, output_fields=["id"], search_params=self.search_params(limit),
                                **({"filter": where} if where else {}))
            for hits in result:
                out.append([(str(hit["id"]), self._score(hit["distance"])) for hit in hits])
        return out

    def _every(self) -> int:
        return min(self._rows, self.limit)

    def _searchable(self, query: str) -> bool:
        """Whether Milvus has anything to search for `query` (else it scores nothing)."""
        return bool(query.strip())

    def score_many(self, queries: Sequence[str], where: str = "") -> list[dict[str, float]]:
        """Each query's scores of the records Milvus ranks: every record for `milvus-dense`,
        every record holding a query word for `milvus-bm25`, the best `limit` of them at
        most (by default 16384, Milvus's largest top-k). One round trip per
        QUERIES_PER_SEARCH queries; every hit crosses the wire, so on a large story a
        lower `limit` is the faster score (11,429 records: about 0.4 s a query in full,
        40 ms at limit=1000)."""
        queries = list(queries)
        results: list[dict[str, float]] = [{} for _ in queries]
        live = [i for i, q in enumerate(queries) if self._searchable(q)]
        if self.collection is None or not live:
            return results
        found = self._search(self._queries([queries[i] for i in live]), self._every(), where)
        for i, hits in zip(live, found):
            results[i] = dict(hits)
        return results

    def score(self, query: str) -> dict[str, float]:
        return self._memo(query, "")

    def _memo(self, query: str, where: str) -> dict[str, float]:
        if self._last is None or self._last[0] != (query, where):
            # a pipeline reads the scores twice (to fuse, and to normalize): one round trip
            self._last = ((query, where), self._score_one(query, where))
        return self._last[1]

    def _score_one(self, query: str, where: str = "") -> dict[str, float]:
        return self.score_many([query], where)[0]

    def top_many(self, queries: Sequence[str], k: int | None = None) -> list[list[tuple[str, float]]]:
        """Each query's best `k`, ties by id as `rank` breaks them: Milvus is asked for k +
        TIE_MARGIN, and asked again for everything when a tie runs past that."""
        check_depth(k)
        return self._top_of(list(queries), k, "")

    def _top_of(self, queries: list[str], k: int | None, where: str) -> list[list[tuple[str, float]]]:
        results: list[list[tuple[str, float]]] = [[] for _ in queries]
        live = [i for i, q in enumerate(queries) if self._searchable(q)]
        if self.collection is None or not live or k == 0:
            return results
        every = self._every()
        limit = every if k is None else min(every, k + TIE_MARGIN)
        data = self._queries([queries[i] for i in live])
        found = self._search(data, limit, where)
        for n, (i, hits) in enumerate(zip(live, found)):
            ranked = rank(dict(hits), k)
            if k is not None and limit < every and len(hits) == limit and ranked \
                    and ranked[-1][1] == min(score for _, score in hits):
                ranked = rank(dict(self._search(data[n:n + 1], every, where)[0]), k)
            results[i] = ranked
        return results

    def top(self, query: str, k: int | None = None) -> list[tuple[str, float]]:
        return self.top_many([query], k)[0]
