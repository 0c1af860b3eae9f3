"""The Milvus retrievers: `milvus-dense` ranks as `dense` does, `milvus-bm25` is BM25 on
Milvus's own words, a story is indexed once, a changed one replaces its collection, and
every fault is one line. Against the Milvus Lite store under the garden home always, and
against a server: the one `GARDEN_MILVUS_SERVER` names, else one `milvus-lite server`
started here on a free loopback port."""
from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from garden.retrievers._milvus_server import start_local_server, stop_local_server
from garden.pipelines.indexes import documents
from garden.errors import GardenError
from garden.formats.stories import load_story
from garden.retrievers import Doc, make_retriever, parse_spec, rank
from rankings import assert_same_ranking

ROOT = Path(__file__).resolve().parents[1]
INSTALL = "pip install -e '.[milvus]'"
MISSING = [name for name in ("pymilvus", "milvus_lite") if importlib.util.find_spec(name) is None]
needs_milvus = pytest.mark.skipif(bool(MISSING), reason=f"needs {' and '.join(MISSING)}: {INSTALL}")

QUERIES = ["what does mira play", "kerosene stove", "who watches the night sky", "photos of the aurora",
           "when does jonas sleep", "the tablet sync decision"]


@pytest.fixture(scope="module")
def story():
    return load_story(ROOT / "fixtures" / "aurora-ridge.yaml")


@pytest.fixture(scope="module")
def docs(story):
    return documents(story)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The URI of a Milvus server: `GARDEN_MILVUS_SERVER` when set (CI starts
    `milvus-lite server` on 127.0.0.1), else a `milvus-lite server` started here."""
    if MISSING:
        pytest.skip(f"needs {' and '.join(MISSING)}: {INSTALL}")
    given = os.environ.get("GARDEN_MILVUS_SERVER")
    if given:
        yield given
        return
    proc, uri = start_local_server(tmp_path_factory.mktemp("milvus-server") / "data")
    try:
        yield uri
    finally:
        stop_local_server(proc)


@pytest.fixture
def garden_home(tmp_path, monkeypatch):
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    yield tmp_path / ".garden"
    # the in-process Milvus Lite server of this test's store: stopped, so no test holds its lock
    if not MISSING:
        from milvus_lite.server_manager import server_manager_instance

        server_manager_instance.release_server(str(tmp_path / ".garden" / "milvus" / "garden.db"))


def indexed(spec: str, docs, **options):
    retriever = make_retriever(spec, **options)
    retriever.index(docs)
    return retriever


def one_line(exc: pytest.ExceptionInfo) -> str:
    assert len(exc.value.messages) == 1 and "\n" not in exc.value.messages[0], exc.value.messages
    return exc.value.messages[0]


# --- without the packages, and the options ---------------------------------------------------


def test_without_pymilvus_making_one_is_one_line_naming_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pymilvus", None)  # as if it were not installed
    for name in ("milvus-bm25", "milvus-dense", "milvus-hybrid"):
        with pytest.raises(GardenError) as exc:
            make_retriever(name)
        line = one_line(exc)
        assert "pymilvus" in line and INSTALL in line, line


def test_a_local_store_without_milvus_lite_names_the_install_and_a_server_needs_no_lite(monkeypatch):
    if importlib.util.find_spec("pymilvus") is None:
        pytest.skip(f"needs pymilvus: {INSTALL}")
    monkeypatch.setitem(sys.modules, "milvus_lite", None)
    with pytest.raises(GardenError) as exc:
        make_retriever("milvus-bm25")
    assert "milvus-lite" in one_line(exc) and INSTALL in one_line(exc)
    assert make_retriever("milvus-bm25", uri="http://127.0.0.1:19530").uri == "http://127.0.0.1:19530"


@needs_milvus
@pytest.mark.parametrize("options, needle", [
    ({"uri": "ftp://somewhere"}, "option uri must be"),
    ({"uri": "garden"}, "option uri must be"),
    ({"timeout": 0}, "option timeout must be positive"),
    ({"timeout": float("nan")}, "option timeout"),
    ({"pushdown": "maybe"}, "option pushdown"),
])
def test_options_are_checked_before_anything_connects(options, needle):
    with pytest.raises(GardenError, match=needle):
        make_retriever("milvus-bm25", **options)


@needs_milvus
def test_a_bad_pushdown_in_a_pipeline_spec_is_one_located_line(project, capsys):
    from garden.cli import main

    code = main(["query", "aurora-ridge", "lantern", "--pipeline", "default@milvus-hybrid:pushdown=perhaps"])
    out, err = capsys.readouterr()
    lines = [line for line in (out + err).splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "pushdown" in lines[0] and "Traceback" not in out + err, out + err


@needs_milvus
def test_a_spec_carries_a_server_uri_with_its_colons():
    try:
        name, options = parse_spec("milvus-dense:uri=http://127.0.0.1:19530:timeout=5")
    except GardenError:
        pytest.skip("the spec parser does not yet keep ':' inside an option's value")
    assert (name, options) == ("milvus-dense", {"uri": "http://127.0.0.1:19530", "timeout": 5})
    made = make_retriever("milvus-hybrid:uri=http://127.0.0.1:19530:timeout=5")
    assert {m.uri for m in made.members().values()} == {"http://127.0.0.1:19530"}
    assert {m.timeout for m in made.members().values()} == {5.0}


@needs_milvus
def test_making_one_connects_to_nothing(garden_home):
    make_retriever("milvus-hybrid", uri="http://127.0.0.1:1")
    make_retriever("milvus-dense")
    assert not (garden_home / "milvus").exists()


@needs_milvus
def test_the_client_does_not_ping_an_idle_connection(garden_home):
    """pymilvus pings every 10 s, idle or not; Milvus Lite's gRPC server allows one ping in
    5 minutes without data and answers more with GOAWAY (too_many_pings), which once broke
    `garden compare` on Vaswani when a cold encoding kept the process busy for 85 s between
    two members' connections. The channel the retrievers use is made without idle pings."""
    retriever = make_retriever("milvus-bm25")
    options = retriever._connect()._get_connection()._grpc_options
    assert options.get("grpc.keepalive_permit_without_calls") == 0
    assert options.get("grpc.keepalive_time_ms", 0) >= 300_000


# --- the embedded store -----------------------------------------------------------------------


@needs_milvus
def test_milvus_dense_ranks_exactly_as_dense(garden_home, docs):
    dense = indexed("dense", docs)
    milvus = indexed("milvus-dense", docs)
    assert milvus.kind == "semantic" and milvus.ceiling("anything") == 1.0
    for query in QUERIES:
        assert_same_ranking(dense.top(query, 15), milvus.top(query, 15), label=query)
        scores, milvus_scores = dense.score(query), milvus.score(query)
        assert set(milvus_scores) == set(scores) == {d.id for d in docs}
        assert max(abs(scores[rid] - milvus_scores[rid]) for rid in scores) <= 1e-5
        assert_same_ranking(rank(scores), rank(milvus_scores), label=query)
    for ours, theirs in zip(dense.top_many(QUERIES, None), milvus.top_many(QUERIES, None)):
        assert_same_ranking(ours, theirs)


@needs_milvus
@pytest.mark.parametrize("where", ["store", "server"])
def test_milvus_bm25_ranks_and_scores_as_bm25(where, request, garden_home, docs):
    """Milvus indexes the garden's own terms (bm25's stopwords and Snowball stems), so its
    BM25 is `bm25`'s: the same records, rankings and scores (float32 in Milvus: within a
    relative 1e-5), and the same ceiling, read from the saved statistics."""
    options = {"uri": request.getfixturevalue("server")} if where == "server" else {}
    bm25 = indexed("bm25", docs)
    milvus = indexed("milvus-bm25", docs, **options)
    for query in QUERIES + ["sleeping photographs", "stoves stove STOVE"]:
        ours, theirs = dict(bm25.score(query)), milvus.score(query)
        assert set(theirs) == set(ours) and ours, query
        assert all(math.isclose(theirs[rid], ours[rid], rel_tol=1e-5) for rid in ours), query
        assert_same_ranking(bm25.top(query, 10), milvus.top(query, 10), label=query)
        assert milvus.ceiling(query) == pytest.approx(bm25.ceiling(query), rel=1e-12)
        # a record's score read without a search is the one Milvus gives it
        alone = milvus.scores_of(query, list(theirs) + ["no.such.record"])
        assert set(alone) == set(theirs)
        assert all(math.isclose(alone[rid], theirs[rid], rel_tol=1e-5) for rid in theirs), query
    assert milvus.score("the of and") == {} and milvus.score("   ") == {} and milvus.top("the", 3) == []


@needs_milvus
@pytest.mark.parametrize("where", ["store", "server"])
def test_a_pipeline_search_returns_the_candidate_depth_and_reads_the_rest_by_id(where, request, garden_home, docs):
    """Given a pipeline's candidate depth, each member returns its best `depth` records
    (ties by id, as `rank` breaks them); the score of any other record is read by id
    (`scores_of`: saved statistics, cached vectors) and equals the one a full search gives."""
    options = {"uri": request.getfixturevalue("server")} if where == "server" else {}
    for spec in ("milvus-bm25", "milvus-dense"):
        member = indexed(spec, docs, **options)
        assert member.top_only
        for query in QUERIES:
            full = member.score(query)
            for depth in (1, 5, 12):
                top = member.components(query, depth=depth)[spec]
                assert list(top.items()) == rank(full, depth), (spec, query, depth)
            rest = [d.id for d in docs if d.id not in top]
            alone = member.scores_of(query, rest)
            assert set(alone) == {rid for rid in rest if rid in full}
            assert max((abs(alone[rid] - full[rid]) for rid in alone), default=0.0) <= 1e-5


@needs_milvus
def test_the_term_statistics_are_saved_owner_only_and_read_by_the_next_retriever(garden_home, docs):
    from garden.retrievers import _term_stats

    first = indexed("milvus-bm25", docs)
    saved = _term_stats.saved_path(first.collection)
    assert saved.is_file() and (saved.stat().st_mode & 0o777) == 0o600
    assert first.stats.documents == len(docs) and first.stats.df
    calls = []
    real = _term_stats.TermStatistics.count
    try:
        _term_stats.TermStatistics.count = classmethod(lambda cls, *a: calls.append(a) or real(*a))
        second = indexed("milvus-bm25", docs)
    finally:
        _term_stats.TermStatistics.count = real
    assert calls == [] and second.stats.df == first.stats.df and second.stats.length == first.stats.length
    saved.chmod(0o644)  # another user could have written it: not read, counted again
    third = indexed("milvus-bm25", docs)
    assert third.stats.df == first.stats.df


@needs_milvus
def test_a_second_retriever_on_the_same_docs_inserts_nothing(garden_home, docs):
    from garden.retrievers import _milvus as module

    first = indexed("milvus-dense", docs)
    assert first.inserted == len(docs)
    before = dict(module.COUNTS)
    second = indexed("milvus-dense", docs)
    assert second.inserted == 0 and second.encoded == 0 and second.collection == first.collection
    assert module.COUNTS["milvus-dense:reused"] == before.get("milvus-dense:reused", 0) + 1
    assert second.top("kerosene stove", 5) == first.top("kerosene stove", 5)


SECOND_PROCESS = """
import json, sys
from garden.retrievers import Doc, make_retriever
docs = [Doc(f"r{i}", text) for i, text in enumerate(json.loads(sys.argv[1]))]
options = {"uri": sys.argv[2]} if len(sys.argv) > 2 else {}
retriever = make_retriever("milvus-bm25", **options)
retriever.index(docs)
print(json.dumps({"collection": retriever.collection, "inserted": retriever.inserted,
                  "top": retriever.top("lantern cove", 3)}))
"""

TEXTS = ["a lantern at the cove", "salt on the nets", "gulls over the cove at dawn", "rope and kelp", "lantern oil"]


def run_process(env_home: Path, *args: str) -> dict:
    env = {**os.environ, "GARDEN_HOME": str(env_home)}
    done = subprocess.run([sys.executable, "-c", SECOND_PROCESS, json.dumps(TEXTS), *args], env=env,
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == "", done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@needs_milvus
def test_a_second_process_reuses_the_collection_of_the_first(tmp_path):
    first = run_process(tmp_path / ".garden")
    second = run_process(tmp_path / ".garden")
    assert first["inserted"] == len(TEXTS) and second["inserted"] == 0
    assert second["collection"] == first["collection"] and second["top"] == first["top"]
    assert [rid for rid, _ in first["top"]][:1] == ["r0"]


@needs_milvus
def test_a_changed_story_gets_a_new_collection_and_the_old_is_dropped(garden_home, docs):
    from pymilvus import MilvusClient

    first = indexed("milvus-bm25", docs)
    changed = [Doc(d.id, d.text + " (edited)") if i == 0 else d for i, d in enumerate(docs)]
    second = indexed("milvus-bm25", changed)
    assert second.collection != first.collection and second.inserted == len(docs)
    names = MilvusClient(str(garden_home / "milvus" / "garden.db")).list_collections()
    assert second.collection in names and first.collection not in names
    # another retriever family on the same story is not the same collection's stale copy
    other = indexed("milvus-bm25", changed, k1=1.2)
    names = MilvusClient(str(garden_home / "milvus" / "garden.db")).list_collections()
    assert {second.collection, other.collection} <= set(names)


@needs_milvus
def test_limit_caps_what_one_search_returns_and_the_fusion_shares_it(garden_home, docs):
    full = indexed("milvus-dense", docs)
    capped = indexed("milvus-dense", docs, limit=5)
    assert len(capped.score("kerosene stove")) == 5 and len(full.score("kerosene stove")) == len(docs)
    assert capped.top("kerosene stove", 20) == full.top("kerosene stove", 5)
    assert capped.top("kerosene stove", 3) == full.top("kerosene stove", 3)
    fusion = make_retriever("milvus-hybrid", limit=7, timeout=4)
    assert {(m.limit, m.timeout) for m in fusion.members().values()} == {(7, 4.0)}
    with pytest.raises(GardenError, match="option limit must be"):
        make_retriever("milvus-bm25", limit=16385)


@needs_milvus
def test_an_empty_story_has_no_collection_and_scores_nothing(garden_home):
    retriever = indexed("milvus-bm25", [])
    assert retriever.collection is None and retriever.score("lantern") == {} and retriever.top("lantern", 3) == []


# --- faults -------------------------------------------------------------------------------


@needs_milvus
def test_an_unreachable_uri_is_one_line_naming_it_within_the_timeout(docs):
    retriever = make_retriever("milvus-bm25", uri="http://127.0.0.1:1", timeout=3)
    start = time.monotonic()
    with pytest.raises(GardenError) as exc:
        retriever.index(docs)
    assert time.monotonic() - start < 3 + 2
    line = one_line(exc)
    assert "http://127.0.0.1:1" in line and "milvus-lite server" in line and INSTALL in line, line


@needs_milvus
def test_a_server_that_never_answers_is_one_line_within_the_timeout(docs):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        uri = f"http://127.0.0.1:{silent.getsockname()[1]}"
        retriever = make_retriever("milvus-dense", uri=uri, timeout=2)
        start = time.monotonic()
        with pytest.raises(GardenError) as exc:
            retriever.index(docs)
        assert time.monotonic() - start < 2 + 3
    assert uri in one_line(exc)


@needs_milvus
def test_a_store_another_process_holds_is_one_line_saying_how_to_serve_it(tmp_path, docs):
    store = tmp_path / "held.db"
    holder = subprocess.Popen([sys.executable, "-c",
                               # owner-only, as the garden makes a store: the lock, not the trust rule, refuses it
                               "import os, sys, time\nos.umask(0o077)\nfrom pymilvus import MilvusClient\n"
                               f"MilvusClient({str(store)!r})\nprint('open', flush=True)\ntime.sleep(120)\n"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(GardenError) as exc:
            indexed("milvus-bm25", docs, uri=str(store))
        line = one_line(exc)
        assert str(store) in line and "another process" in line and "milvus-lite server --data-dir" in line, line
    finally:
        holder.kill()
        holder.wait()


@needs_milvus
def test_a_collection_dropped_while_in_use_is_one_line(garden_home, docs):
    from pymilvus import MilvusClient

    retriever = indexed("milvus-bm25", docs)
    MilvusClient(str(garden_home / "milvus" / "garden.db")).drop_collection(retriever.collection)
    with pytest.raises(GardenError) as exc:
        retriever.top("kerosene stove", 3)
    line = one_line(exc)
    assert retriever.collection in line and "missing" in line and "run again" in line, line
    again = indexed("milvus-bm25", docs)  # the next run rebuilds it
    assert again.inserted == len(docs) and again.top("kerosene stove", 1)


@needs_milvus
def test_a_damaged_collection_is_rebuilt_with_one_warning(garden_home, docs, capsys):
    from pymilvus import MilvusClient

    retriever = indexed("milvus-bm25", docs)
    previous = os.umask(0o077)  # this client writes owner-only, as the garden's does: only the damage is news
    try:
        client = MilvusClient(str(garden_home / "milvus" / "garden.db"))
        client.delete(retriever.collection, ids=[docs[0].id])
        client.flush(retriever.collection)
    finally:
        os.umask(previous)
    again = indexed("milvus-bm25", docs)
    assert again.inserted == len(docs)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rebuilding" in err and retriever.collection in err


# --- the fusion and the command line --------------------------------------------------------


@needs_milvus
def test_milvus_hybrid_is_hybrid_of_its_two_members(garden_home, docs):
    named = indexed("milvus-hybrid", docs)
    spelled = indexed("hybrid", docs, retrievers=("milvus-bm25", "milvus-dense"))
    assert list(named.members()) == ["milvus-bm25", "milvus-dense"] and named.kind == "fusion"
    assert named.ceiling("x") == spelled.ceiling("x") == 2 / 61
    for query in QUERIES[:3]:
        assert named.top(query, 10) == spelled.top(query, 10)
        assert named.score(query) == spelled.score(query)


@needs_milvus
@pytest.mark.parametrize("where", ["store", "server"])
def test_milvus_hybrids_members_search_at_once_and_score_as_one_after_the_other(where, request, garden_home, docs):
    """Given a candidate depth, `milvus-hybrid`'s members search in threads of their own
    (garden.retrievers.milvus, `MilvusHybrid.components`): the scores are those of asking
    one member after the other, and the dense member has read the vectors of the lexical
    member's best records while it searched, which score as they do read alone."""
    import logging

    from garden.retrievers.hybrid import HybridRetriever

    options = {"uri": request.getfixturevalue("server")} if where == "server" else {}
    hybrid = indexed("milvus-hybrid", docs, **options)
    dense = hybrid.members()["milvus-dense"]
    levels = {name: logging.getLogger(name).level for name in ("pymilvus", "milvus_lite")}
    umask = os.umask(0o022)
    os.umask(umask)
    for query in QUERIES:
        for depth in (5, 12):
            at_once = hybrid.components(query, depth=depth)
            for member in hybrid.members().values():
                member._last = None
            assert at_once == HybridRetriever.components(hybrid, query, depth=depth), (query, depth)
    kept = dict(dense._vectors._entries)
    assert kept
    fresh = indexed("milvus-dense", docs, **options)
    assert all(np.array_equal(vector, fresh.vectors([rid])[rid]) for rid, vector in kept.items())
    # the loggers silenced and the umask made private while a call runs are put back once
    assert {name: logging.getLogger(name).level for name in levels} == levels
    assert os.umask(umask) == umask


@needs_milvus
def test_a_query_runs_through_the_command_line_with_milvus_hybrid(project, capsys):
    from garden.cli import main

    code = main(["query", "aurora-ridge", "what does mira play", "--pipeline", "milvus-hybrid"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "milvus-hybrid" in out and "state.mira.gaming" in out and "Traceback" not in out + err
    from milvus_lite.server_manager import server_manager_instance

    server_manager_instance.release_server(str(project / ".garden" / "milvus" / "garden.db"))
    doctor = main(["doctor"])
    assert doctor == 0, capsys.readouterr().out  # the store under the garden home is owner-only


@needs_milvus
def test_an_unreachable_server_through_the_command_line_is_exit_2_one_line(project, capsys):
    from garden.cli import main

    try:
        parse_spec("milvus-bm25:uri=http://127.0.0.1:1:timeout=2")
    except GardenError:
        pytest.skip("the spec parser does not yet keep ':' inside an option's value")
    code = main(["query", "aurora-ridge", "lantern", "--pipeline", "milvus-bm25:uri=http://127.0.0.1:1:timeout=2"])
    out, err = capsys.readouterr()
    assert code == 2
    lines = [line for line in (out + err).splitlines() if line.strip()]
    assert len(lines) == 1 and "http://127.0.0.1:1" in lines[0] and "Traceback" not in out + err, out + err


# --- a server ---------------------------------------------------------------------------------


@needs_milvus
def test_on_a_server_milvus_dense_ranks_as_dense_and_milvus_bm25_as_on_the_store(server, garden_home, docs):
    dense = indexed("dense", docs)
    remote = indexed("milvus-dense", docs, uri=server)
    local = indexed("milvus-bm25", docs)
    remote_bm25 = indexed("milvus-bm25", docs, uri=server)
    for query in QUERIES:
        assert_same_ranking(dense.top(query, 10), remote.top(query, 10), label=query)
        assert remote_bm25.top(query, 10) == local.top(query, 10)


@needs_milvus
def test_on_a_server_a_second_process_reuses_the_collection(server, tmp_path):
    first = run_process(tmp_path / "one", server)
    second = run_process(tmp_path / "two", server)  # another garden home: the server holds the index
    assert second["inserted"] == 0 and second["collection"] == first["collection"]
    assert second["top"] == first["top"]


@needs_milvus
def test_a_server_that_stops_is_one_line_naming_it(tmp_path, docs):
    proc, uri = start_local_server(tmp_path / "data")
    try:
        retriever = indexed("milvus-bm25", docs, uri=uri, timeout=3)
        assert retriever.top("kerosene stove", 1)
    finally:
        stop_local_server(proc)
    start = time.monotonic()
    with pytest.raises(GardenError) as exc:
        retriever.top("propane stove", 1)
    assert time.monotonic() - start < 3 + 3
    line = one_line(exc)
    assert uri in line and re.search(r"cannot reach|did not answer", line), line


# --- pushing the gate's hard rules down -------------------------------------------------------

def _fields(story):
    from garden.rerank.timeline import record_fields

    return {r.id: record_fields(r, story) for r in story.records if r.kind != "control"}


@needs_milvus
@pytest.mark.parametrize("where", ["store", "server"])
def test_a_pushed_down_search_scores_exactly_the_records_the_hard_rules_admit(where, request, garden_home):
    import datetime as dt

    from garden.retrievers import Eligible

    story = load_story(ROOT / "fixtures" / "saltmarsh-ferry.yaml")
    docs, fields = documents(story), _fields(story)
    options = {"uri": request.getfixturevalue("server")} if where == "server" else {}
    retriever = make_retriever("milvus-dense:pushdown=true", **options)
    retriever.describe_records(fields)
    retriever.index(docs)
    plain = indexed("milvus-dense", docs, **options)
    assert retriever.collection != plain.collection  # the fields are another layout
    days = sorted({dt.date.fromordinal(f.appeared) for f in fields.values() if f.appeared})
    assert len(days) > 2
    seen_excluded = False
    for day in (days[0], days[len(days) // 2], days[-1]):
        for private in (False, True):
            eligible = Eligible(day, private)
            scored = retriever.components("the fog horn at the north landing", eligible)["milvus-dense"]
            admitted = {rid for rid, f in fields.items() if eligible.admits(f)}
            assert set(scored) == admitted  # milvus-dense scores every record it may
            seen_excluded |= len(admitted) < len(fields)
            everything = plain.score("the fog horn at the north landing")
            assert all(abs(everything[rid] - s) <= 1e-6 for rid, s in scored.items())  # a filter, not a rescoring
    assert seen_excluded


@needs_milvus
def test_a_changed_field_gives_another_collection(garden_home):
    story = load_story(ROOT / "fixtures" / "saltmarsh-ferry.yaml")
    docs, fields = documents(story), _fields(story)
    first = make_retriever("milvus-bm25:pushdown=true")
    first.describe_records(fields)
    first.index(docs)
    rid = next(iter(fields))
    changed = {**fields, rid: fields[rid]._replace(private=not fields[rid].private)}
    second = make_retriever("milvus-bm25:pushdown=true")
    second.describe_records(changed)
    second.index(docs)
    assert second.inserted and second.collection != first.collection


@needs_milvus
def test_pushed_down_the_gates_verdicts_hold_and_the_gate_still_checks(project, monkeypatch):
    """door-retriever's query on `default@milvus-hybrid:pushdown=true`: the private note and
    the later log are no longer candidates (so no longer among the rejections: the rule
    that makes pushdown an option), the control record the query names is still refused by
    the gate, and with a filter that admits everything the gate still refuses them."""
    from garden import api
    from garden.retrievers._milvus import _MilvusRetriever

    case = {"story": "saltmarsh-ferry", "as_of": "2031-05-20",
            "text": "How many times did the fog horn sound at the north landing? Check control.tally.0505 too."}

    def ask(pipeline: str, **extra) -> dict:
        return api.query(case["story"], case["text"], as_of=case["as_of"], pipeline=pipeline, **extra)

    pushed = ask("default@milvus-hybrid:pushdown=true")
    rejected = {r["id"]: r["reason"] for r in pushed["rejected"]}
    served = [item["id"] for item in pushed["items"]]
    assert served and served[0] == "log.fog.0503"
    assert rejected.get("control.tally.0505") == "control_plane"
    assert "note.fog.private" not in rejected and "log.fog.0601" not in rejected
    assert not {"note.fog.private", "log.fog.0601"} & set(served)
    plain = {r["id"]: r["reason"] for r in ask("default@milvus-hybrid")["rejected"]}
    assert plain.get("note.fog.private") == "private" and plain.get("log.fog.0601") == "not_yet_observed"
    allowed = [item["id"] for item in ask("default@milvus-hybrid:pushdown=true", include_private=True)["items"]]
    assert "note.fog.private" in allowed
    # a filter that lets everything through: what the gate refuses is refused all the same
    monkeypatch.setattr(_MilvusRetriever, "filter_for", staticmethod(lambda eligible: "appeared >= 0"))
    unfiltered = ask("default@milvus-hybrid:pushdown=true")
    again = {r["id"]: r["reason"] for r in unfiltered["rejected"]}
    assert again.get("note.fog.private") == "private" and again.get("log.fog.0601") == "not_yet_observed"
    from milvus_lite.server_manager import server_manager_instance

    server_manager_instance.release_server(str(project / ".garden" / "milvus" / "garden.db"))


# --- the structured pipeline on Milvus ----------------------------------------------------------


def _served(pipeline: str) -> dict[str, tuple]:
    """Every regression query's (decision, packed ids) under `pipeline`, by case and control."""
    from garden.evaluation.runner import run_cases

    out = {}
    for result in run_cases([str(ROOT / "regression")], pipeline).results:
        for name, ran in [("", result.main), *((c.name, c) for c in result.controls)]:
            packet = ran.packet  # None for a case whose story is meant not to build
            out[f"{result.case}/{name}"] = packet and (packet["decision"], [item["id"] for item in packet["items"]])
    return out


@needs_milvus
def test_default_on_milvus_serves_defaults_packets_embedded_and_on_a_server(server, project):
    """The shipped stories are smaller than the candidate depth (50), so each member's best
    50 is every record it scores: `default@milvus-hybrid` must then serve exactly what
    `default` serves, query for query, embedded and on a server alike."""
    expected = _served("default")
    assert len(expected) > 25
    assert _served("default@milvus-hybrid") == expected
    assert _served(f"default@milvus-hybrid:uri={server}") == expected
    from milvus_lite.server_manager import server_manager_instance

    server_manager_instance.release_server(str(project / ".garden" / "milvus" / "garden.db"))


@needs_milvus
def test_a_candidate_milvus_did_not_return_carries_every_members_score(garden_home, story, docs):
    """With a candidate depth below the story's size (4 of 48), a candidate one member
    returned and the other did not, or that the story's structure anchored, still carries
    both members' raw scores, read by id: `bm25`'s and `dense`'s, within float32."""
    import datetime as dt

    from garden.rerank.stages import Settings
    from garden.pipelines import make_pipeline
    from garden.rerank.query import QuerySpec

    bm25, dense = indexed("bm25", docs), indexed("dense", docs)
    pipeline = make_pipeline("default@milvus-hybrid")
    for query in ("jonas and mira at the observatory", "the kerosene stove mira chose"):
        spec = QuerySpec(story, query, dt.date(2031, 1, 1), settings=Settings(candidates=4))
        candidates = {c["id"]: c["scores"] for c in pipeline.run(spec).stages["candidates"]}
        assert len(candidates) > 4, query  # more than the depth: the rest came by id
        lexical, semantic = dict(bm25.score(query)), dense.score(query)
        for rid, scores in candidates.items():
            assert scores.keys() == {"milvus-bm25", "milvus-dense"}
            assert scores["milvus-bm25"] == pytest.approx(lexical.get(rid, 0.0), rel=1e-5, abs=1e-6), rid
            assert scores["milvus-dense"] == pytest.approx(semantic[rid], abs=1e-5), rid
