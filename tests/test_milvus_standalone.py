"""The Milvus retrievers on a Milvus standalone (PyPI `milvus`, Milvus 2.3's C++ engine):
one started here is reachable on its loopback port alone and keeps its data owner-only;
on the one `GARDEN_MILVUS_STANDALONE` names (.ci/run starts it), `milvus-dense` builds an
HNSW index and finds `dense`'s neighbours, `milvus-bm25` refuses in one line (Milvus 2.3
has no BM25 function), `milvus-hybrid`'s lexical member is `bm25` in the garden's process,
`default@milvus-hybrid` serves `default`'s packets, and on Vaswani it keeps `dense`'s and
`default`'s figures (docs/milvus.md, "A Milvus standalone")."""
from __future__ import annotations

import datetime as dt
import os
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest

import test_milvus
from encoded_once import encode_once
from garden.errors import GardenError
from garden.retrievers import make_retriever
from test_milvus import MISSING, QUERIES, _served, indexed, one_line

ROOT = Path(__file__).resolve().parents[1]
VASWANI = ROOT.parent / "shared" / "data" / "vaswani"
ENV = "GARDEN_MILVUS_STANDALONE"
WAIT = 360.0  # seconds a test waits for the standalone .ci/run started while pytest collected
RECALL_AT, RECALL = 100, 0.99  # HNSW at the default parameters against exact search (the target)
DENSE_AP_DISTANCE, DEFAULT_AP_DISTANCE = 0.002, 0.005  # the targets against `dense` and `default`

needs_milvus = pytest.mark.skipif(bool(MISSING), reason=f"needs {' and '.join(MISSING)}: pip install -e '.[milvus]'")


def _accepts(uri: str, seconds: float) -> bool:
    host, port = uri.split("://", 1)[1].rsplit(":", 1)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, int(port)), timeout=1):
                return True
        except OSError:
            time.sleep(1)
    return False


@pytest.fixture(scope="module")
def standalone():
    """The URI `GARDEN_MILVUS_STANDALONE` names, once it accepts connections; skipped without it."""
    uri = os.environ.get(ENV)
    if MISSING or not uri:
        pytest.skip(f"no Milvus standalone named by {ENV} (.ci/run starts one; docs/milvus.md says how)")
    assert _accepts(uri, WAIT), f"{ENV}={uri} accepted no connection within {WAIT:g} s"
    return uri


story, docs = test_milvus.story, test_milvus.docs  # aurora-ridge and its documents, as fixtures here too


@pytest.fixture
def garden_home(tmp_path, monkeypatch):
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    return tmp_path / ".garden"


# --- one started here: loopback only, owner-only ------------------------------------------------


def _tree(pid: int) -> set[int]:
    """`pid` and every process descended from it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        one = todo.pop()
        found.add(one)
        todo += children.get(one, [])
    return found


def _listening_here(pids: set[int]) -> list[str]:
    """The addresses (ip:port) on which `pids` listen in this process's network namespace."""
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    out = []
    for table, width in (("tcp", 8), ("tcp6", 32)):
        for line in Path(f"/proc/self/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                ip = ".".join(str(int(address[i:i + 2], 16)) for i in (6, 4, 2, 0)) if width == 8 else address
                out.append(f"{ip}:{int(port, 16)}")
    return out


@needs_milvus
def test_a_standalone_started_here_listens_on_its_loopback_port_alone_and_keeps_its_data_private(tmp_path):
    from garden.retrievers._milvus_server import start_standalone, stop_local_server
    from garden.retrievers._milvus_standalone import installed, unshare_command

    if not installed():
        pytest.skip("needs the milvus package (the standalone's engine): pip install -e '.[milvus]'")
    if subprocess.run([*unshare_command(), "true"], capture_output=True).returncode != 0:
        pytest.skip(f"this machine allows no new namespaces ({' '.join(unshare_command())})")
    data = tmp_path / "standalone"
    proc, uri = start_standalone(data, tmp_path / "standalone.log")
    try:
        port = int(uri.rsplit(":", 1)[1])
        pids = _tree(proc.pid)
        assert len(pids) >= 2  # the relay and Milvus itself
        assert _listening_here(pids) == [f"127.0.0.1:{port}"]
        for space in ("net", "mnt"):  # its own loopback, its own /run (where Milvus keeps its pid file)
            own = os.readlink(f"/proc/self/ns/{space}")
            assert all(os.readlink(f"/proc/{pid}/ns/{space}") != own for pid in pids), space
        client = make_retriever(f"milvus-dense:uri={uri}")
        assert client.engine().startswith("v2.3")
        for entry in [data, *data.rglob("*")]:
            mode = os.lstat(entry).st_mode
            assert stat.S_ISLNK(mode) or not mode & 0o077, f"{entry}: {stat.filemode(mode)}"
    finally:
        stop_local_server(proc)
    time.sleep(0.5)
    alive = [pid for pid in pids if Path(f"/proc/{pid}").exists()
             and (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z")]
    assert not alive, f"still running after the stop: {alive}"


def test_a_data_folder_that_is_a_link_or_anothers_is_refused(tmp_path):
    from garden.retrievers._milvus_standalone import private_folder

    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(ValueError, match="not a folder"):
        private_folder(tmp_path / "link")
    made = private_folder(tmp_path / "new" / "data")
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o700


# --- on the standalone CI names -------------------------------------------------------------------


@needs_milvus
def test_milvus_dense_builds_hnsw_and_finds_denses_neighbours(standalone, garden_home, docs):
    dense = indexed("dense", docs)
    milvus = indexed(f"milvus-dense:uri={standalone}", docs)
    assert milvus.index_type == "HNSW" and "_hnsw_m16_efc128_" in milvus.collection
    described = milvus._call("check the collection", "describe_index", milvus.collection, milvus.field)
    assert (described["index_type"], described["M"], described["efConstruction"]) == ("HNSW", "16", "128")
    assert milvus.search_params(1000)["params"]["ef"] == 1000 and milvus.search_params(10)["params"]["ef"] == 512
    for query in QUERIES:
        ours, theirs = dense.top(query, 15), milvus.top(query, 15)
        assert [rid for rid, _ in theirs] == [rid for rid, _ in ours], query
        assert max(abs(a - b) for (_, a), (_, b) in zip(ours, theirs)) <= 1e-5, query
    flat = indexed(f"milvus-dense:uri={standalone}:index=flat", docs)
    assert flat.index_type == "FLAT" and flat.collection != milvus.collection


@needs_milvus
def test_milvus_bm25_on_a_server_without_bm25_is_one_line(standalone, garden_home, docs):
    with pytest.raises(GardenError) as exc:
        indexed(f"milvus-bm25:uri={standalone}", docs)
    line = one_line(exc)
    assert "no BM25 function" in line and standalone in line and "milvus-hybrid" in line, line


@needs_milvus
def test_milvus_hybrids_lexical_member_is_bm25_in_process_and_why_names_it(standalone, garden_home, story, docs):
    from garden.pipelines import make_pipeline
    from garden.rerank.query import QuerySpec

    hybrid = indexed(f"milvus-hybrid:uri={standalone}", docs)
    assert hybrid.lexical == "bm25" and list(hybrid.members()) == ["bm25", "milvus-dense"]
    assert indexed("milvus-hybrid", docs).lexical == "milvus-bm25"  # Milvus Lite keeps its own BM25
    pipeline = make_pipeline(f"default@milvus-hybrid:uri={standalone}")
    outcome = pipeline.run(QuerySpec(story, "the kerosene stove mira chose", dt.date(2031, 1, 1)))
    candidates = outcome.stages["candidates"]
    assert candidates and all(c["scores"].keys() == {"bm25", "milvus-dense"} for c in candidates)
    assert any(why.startswith("bm25 ") for item in outcome.packet.items for why in item.why)


@needs_milvus
def test_default_on_the_standalone_serves_defaults_packets(standalone, project):
    expected = _served("default")
    assert len(expected) > 25
    assert _served(f"default@milvus-hybrid:uri={standalone}") == expected


@needs_milvus
def test_a_story_in_milvus_on_the_standalone_serves_the_packets_of_its_file(standalone, tmp_path, monkeypatch):
    """On Milvus 2.3 (no BM25, no sparse vectors) a story still lives in Milvus
    (garden.store.milvus): its records in a collection whose one vector is a float, the dense
    member's collection, and `bm25` indexed at ingest and saved beside the tables, owner-only,
    then read back (its large arrays mapped) rather than built from the documents. It serves
    the packets of its file, and a second ingest writes nothing."""
    from garden import api
    from garden.formats.stories import load_story
    from garden.store.milvus import StoredStory, ingest, stored_story
    from test_stored import QUERIES as STORED_QUERIES, as_lines

    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    (tmp_path / "fixtures").mkdir()
    lines = as_lines(ROOT / "fixtures" / "aurora-ridge.yaml", tmp_path / "fixtures")
    done = ingest(lines, uri=standalone)
    assert done["saved"] == {"bm25 in process": "aurora-ridge.bm25.npz"} and len(done["collections"]) == 2
    folder = tmp_path / ".garden" / "stored"
    assert sorted(p.name for p in folder.iterdir()) == [
        "aurora-ridge.bm25.npz", "aurora-ridge.json", "aurora-ridge.phrase.npz", "aurora-ridge.tables.npz"]
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in folder.iterdir())
    stored = stored_story("aurora-ridge")
    assert isinstance(stored, StoredStory) and len(stored.records) == 48
    story = load_story(ROOT / "fixtures" / "aurora-ridge.yaml")
    pipeline = f"default@milvus-hybrid:uri={standalone}"
    for text, as_of, private in STORED_QUERIES:
        ours = api.query(story, text, pipeline=pipeline, as_of=as_of, include_private=private)
        assert api.query(stored, text, pipeline=pipeline, as_of=as_of, include_private=private) == ours, text
    from garden.pipelines.indexes import PROCESS_INDEXES, documents

    hybrid = PROCESS_INDEXES.retriever(stored, f"milvus-hybrid:uri={standalone}")
    lexical = hybrid.members()["bm25"]
    assert hybrid.lexical == "bm25" and lexical.ids == stored.indexed_ids().ids
    assert lexical.top("kerosene stove", 5) == indexed("bm25", documents(story)).top("kerosene stove", 5)
    assert set(ingest(lines, uri=standalone)["inserted"].values()) == {0}


def test_a_request_names_no_index_or_parameter_of_a_served_pipeline():
    from garden.serve._core import RequestError, parse_request

    served = ["default@milvus-hybrid:uri=http://127.0.0.1:19530"]
    for asked in ("default@milvus-hybrid:uri=http://127.0.0.1:19530:index=flat",
                  "default@milvus-hybrid:uri=http://127.0.0.1:19530:ef=32768",
                  "default@milvus-hybrid:index=hnsw:m=2048", "milvus-dense:uri=http://127.0.0.1:19530"):
        with pytest.raises(RequestError) as exc:
            parse_request({"story": "aurora-ridge", "text": "gaming", "pipeline": asked}, ["aurora-ridge"], served)
        assert exc.value.status == 404 and exc.value.field == "pipeline"


@needs_milvus
@pytest.mark.skipif(not (VASWANI / "corpus").is_dir(), reason=f"the Vaswani collection is not at {VASWANI}")
def test_on_vaswani_the_standalone_keeps_denses_and_defaults_figures(standalone, tmp_path, tmp_path_factory,
                                                                   monkeypatch):
    """HNSW at the default parameters finds at least 0.99 of exact search's top 100 for
    the 93 queries, and `milvus-dense`'s AP is within 0.002 of `dense`'s; `default` on it
    (bm25 in the garden's process, HNSW in Milvus) within 0.005 of `default`'s."""
    from garden.evaluation.compare import evaluate, run_collection
    from garden.formats.corpora import load_collection

    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    vaswani = load_collection(VASWANI)
    # the vectors tests/test_vaswani.py encodes: waited for if it is encoding them now
    encode_once(tmp_path_factory, "vaswani", vaswani.docs, list(vaswani.queries.values()))
    names = ("dense", f"milvus-dense:uri={standalone}", "default", f"default@milvus-hybrid:uri={standalone}")
    runs = run_collection(vaswani, names, depth=1000)
    exact, approximate = runs.rankings[names[0]], runs.rankings[names[1]]
    found = sum(len({r for r, _ in exact[q][:RECALL_AT]} & {r for r, _ in approximate[q][:RECALL_AT]}) for q in exact)
    recall = found / sum(min(RECALL_AT, len(exact[q])) for q in exact)
    assert recall >= RECALL, recall
    figures = evaluate(vaswani.qrels, runs.rankings, ("AP",)).aggregates
    assert figures[names[1]]["AP"] == pytest.approx(figures["dense"]["AP"], abs=DENSE_AP_DISTANCE)
    assert figures[names[3]]["AP"] == pytest.approx(figures["default"]["AP"], abs=DEFAULT_AP_DISTANCE)
