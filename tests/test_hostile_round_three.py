"""Hostile input, round three: a served memory obeys its operator, not its callers; derived
files are trusted only when they are the user's own and private; the LongMemEval import is
bounded; and what round two left. Each test below failed before the change it checks."""
from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import httpx
import pytest

from test_serve import GARDEN, Server, copy_store, store_env

ROOT = Path(__file__).resolve().parents[1]
QUARRY = """story: quarry
project: quarry
records:
  - id: log.saw
    kind: note
    at: 2031-01-02
    text: The quarry saw blade was replaced on Tuesday.
  - id: note.saw.private
    kind: note
    at: 2031-01-03
    private: true
    text: "Private: the quarry saw blade cost more than the budget allowed."
  - id: log.saw.later
    kind: note
    at: 2031-02-01
    text: The quarry saw blade broke again in February.
"""
BARE = ("bm25", "bm25s", "tfidf", "dense", "hybrid")


def quarry_store(root: Path) -> Path:
    (root / "fixtures").mkdir(parents=True)
    (root / "fixtures" / "quarry.yaml").write_text(QUARRY, encoding="utf-8")
    return root


def raw_request(url: str, head: bytes, timeout: float = 30) -> bytes:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as raw:
        raw.sendall(head)
        reply = b""
        while True:
            chunk = raw.recv(65536)
            if not chunk:
                return reply
            reply += chunk


# --- the operator decides what is served ----------------------------------------------------


@pytest.fixture(scope="module")
def quarry(tmp_path_factory):
    root = quarry_store(tmp_path_factory.mktemp("quarry"))
    served = Server(root, "quarry", "--read-timeout", "2")
    yield served
    served.stop()


def test_a_request_cannot_name_a_path_a_host_or_an_option(quarry):
    root = quarry.root
    index = root / ".garden" / "index"
    saves = sorted(p.name for p in index.iterdir())
    with socket.socket() as listener:   # a host the server must never be made to reach
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        listener.settimeout(0.5)
        port = listener.getsockname()[1]
        for pipeline in (f"milvus-bm25:uri={root}/any/new/dir/x.db", "milvus-bm25:uri=../x.db",
                         f"milvus-bm25:uri={root}/fixtures/e.db", f"milvus-hybrid:uri=http://127.0.0.1:{port}",
                         f"default@milvus-bm25:uri=http://127.0.0.1:{port}", "bm25:k1=2.5", "bm25s:k1=0.1",
                         "dense:backend=torch", "hybrid:retrievers=bm25+tfidf"):
            answer = quarry.post({"text": "quarry saw blade", "pipeline": pipeline})
            assert answer.status_code == 404, (pipeline, answer.text)
            assert answer.json()["field"] == "pipeline" and "not served here" in answer.json()["error"]
        with pytest.raises(socket.timeout):
            listener.accept()
    assert not (root / "any").exists() and not (root / "fixtures" / "e.db").exists()
    assert not (root.parent / "x.db").exists()
    assert sorted(p.name for p in index.iterdir()) == saves     # no index saved for an option
    assert set(quarry.client.get("/pipelines").json()) == {"default", *BARE}


@pytest.mark.parametrize("pipeline", BARE)
def test_a_bare_pipeline_serves_no_private_or_future_record(quarry, pipeline):
    body = {"text": "What happened to the quarry saw blade?", "pipeline": pipeline, "as_of": "2031-01-10"}
    packet = quarry.post(body).json()
    ids = [item["id"] for item in packet["items"]]
    assert "log.saw" in ids and "note.saw.private" not in ids and "log.saw.later" not in ids
    reasons = {r["id"]: r["reason"] for r in packet["rejected"]}
    assert reasons["note.saw.private"] == "private" and reasons["log.saw.later"] == "not_yet_observed"
    allowed = quarry.post({**body, "include_private": True}).json()
    assert "note.saw.private" in [item["id"] for item in allowed["items"]]


def test_the_operator_names_pipelines_with_their_options(tmp_path):
    root = quarry_store(tmp_path)
    served = Server(root, "quarry", "--pipelines", "bm25:k1=2.5,default")
    try:
        assert served.client.get("/health").json()["pipelines"] == ["bm25:k1=2.5", "default"]
        assert served.post({"text": "quarry saw blade", "pipeline": "bm25:k1=2.5"}).status_code == 200
        assert served.post({"text": "quarry saw blade", "pipeline": "bm25"}).status_code == 404
    finally:
        served.stop()
    done = subprocess.run([*GARDEN, "serve", "quarry", "--port", "0", "--pipelines", "bm25:k1=abc"], cwd=root,
                          env=store_env(root), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert "--pipelines bm25:k1=abc" in done.stderr


# --- only its own origin may ask ---------------------------------------------------------------


def test_a_foreign_host_or_origin_or_a_simple_post_is_refused(quarry):
    port = quarry.url.rsplit(":", 1)[1]
    body = json.dumps({"text": "quarry saw blade"})
    cases = [({"Host": f"evil.example:{port}", "Content-Type": "application/json"}, 403, "Host"),
             ({"Origin": "http://evil.example", "Content-Type": "application/json"}, 403, "Origin"),
             ({"Origin": f"http://127.0.0.1:{int(port) + 1}", "Content-Type": "application/json"}, 403, "Origin"),
             ({"Origin": "null", "Content-Type": "application/json"}, 403, "Origin"),
             ({"Content-Type": "text/plain"}, 415, "Content-Type"),
             ({"Content-Type": "application/x-www-form-urlencoded"}, 415, "Content-Type")]
    before = quarry.client.get("/health").json()["queries"]
    for headers, status, field in cases:
        answer = quarry.client.post("/query", content=body, headers=headers)
        assert answer.status_code == status, (headers, answer.text)
        assert answer.json()["field"] == field
    assert quarry.client.get("/health", headers={"Host": "rebound.example"}).status_code == 403
    assert quarry.client.get("/health").json()["queries"] == before     # none of them ran
    own = quarry.client.post("/query", content=body, headers={"Origin": quarry.url,
                                                              "Content-Type": "application/json; charset=utf-8"})
    assert own.status_code == 200


def test_beyond_loopback_a_private_token_is_required(tmp_path):
    root = quarry_store(tmp_path)
    token = tmp_path / "token"
    token.write_text("s3cret-token-of-enough-length\n")
    os.chmod(token, 0o644)
    for argv, says in ((["--host", "0.0.0.0", "--allow-remote"], "--token-file"),
                       (["--token-file", str(token)], "others may read or write it"),
                       (["--token-file", str(tmp_path / "none")], "--token-file")):
        done = subprocess.run([*GARDEN, "serve", "quarry", "--port", "0", *argv], cwd=root, env=store_env(root),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and says in done.stderr, done.stderr
    os.chmod(token, 0o600)
    good = {"Authorization": "Bearer s3cret-token-of-enough-length"}
    served = Server(root, "quarry", "--token-file", str(token), headers=good)
    try:
        body = {"text": "quarry saw blade"}
        assert served.post(body).status_code == 200
        with httpx.Client(base_url=served.url, timeout=60) as stranger:
            assert stranger.post("/query", json=body).status_code == 401
            refused = stranger.post("/query", json=body, headers={"Authorization": "Bearer wrong-token-000000"})
            assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
            assert refused.json()["field"] == "Authorization"
            assert stranger.get("/health").status_code == 401
    finally:
        served.stop()


# --- bounded connections and work -----------------------------------------------------------


def test_stalled_connections_are_closed_and_counted_against_a_cap(tmp_path):
    root = quarry_store(tmp_path)
    served = Server(root, "quarry", "--read-timeout", "1", "--max-connections", "8")
    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    stalled = []
    served.client.close()   # its kept-alive connection would hold one of the eight
    time.sleep(0.2)
    try:
        for n in range(20):
            raw = socket.create_connection((host, int(port)), timeout=10)
            raw.sendall(b"POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Le")   # never finished
            stalled.append(raw)
        replies = []
        for raw in stalled:   # each closed by the server: past the cap at once, the others after 1 s
            reply = b""
            try:
                while chunk := raw.recv(4096):
                    reply += chunk
            except ConnectionResetError:   # closed with the stalled head unread: the 503 may be lost
                reply = reply or b"reset"
            replies.append(reply.split(b"\r\n", 1)[0])
        assert replies.count(b"HTTP/1.1 408 Request Timeout") == 8, replies
        assert replies.count(b"HTTP/1.1 503 Service Unavailable") + replies.count(b"reset") == 12, replies
        body = b'{"text": "quarry'
        reply = raw_request(served.url, b"POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json"
                            b"\r\nContent-Length: 100\r\n\r\n" + body)
        assert reply.startswith(b"HTTP/1.1 408") and b'"field":"body"' in reply
        served.client = httpx.Client(base_url=served.url, timeout=120)
        assert served.alive()
    finally:
        for raw in stalled:
            raw.close()
        served.stop()


def test_a_request_past_the_deadline_is_refused_and_the_next_answered(tmp_path):
    root = copy_store(tmp_path)
    served = Server(root, "aurora-ridge", "--deadline", "0.2", "--pipelines", "default")
    try:
        # texts never seen before (the time in them), so they are encoded now: once in the
        # user's embedding cache, the same request took under the deadline on a quiet machine
        long = " ".join(f"camp stove number {n} and the aurora watch rota {time.time_ns()}" for n in range(40))[:1900]
        session = [f"{n} {long}" for n in range(16)]
        started = time.monotonic()
        answer = served.post({"text": "Who sleeps in the afternoon?", "session": session})
        assert answer.status_code == 503, answer.text
        assert answer.json()["field"] is None and "limit of 0.2 s" in answer.json()["error"]
        assert time.monotonic() - started < 30
        assert served.post({"text": "Who sleeps in the afternoon?"}).status_code == 200
    finally:
        served.stop()


def _children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def test_with_two_workers_an_ordinary_query_does_not_wait_behind_a_costly_one(tmp_path):
    root = copy_store(tmp_path)
    served = Server(root, "aurora-ridge", "--workers", "2", "--deadline", "120", "--pipelines", "default")
    try:
        long = " ".join(f"what about the sled number {n} on the ridge {time.time_ns()}" for n in range(40))[:1900]
        costly: dict = {}

        def ask_costly():
            costly["answer"] = httpx.post(f"{served.url}/query", timeout=300,
                                          json={"text": long, "session": [f"{n} {long}" for n in range(16)]})
            costly["done"] = time.monotonic()

        # asked once first, so its vector is in the user's cache, which both workers read: what
        # is measured is waiting in line, not encoding a new question on cores the costly one
        # keeps busy (with a cold cache the two finished within 2 ms of each other)
        question = {"text": "Who sleeps in the afternoon?"}
        assert httpx.post(f"{served.url}/query", json=question, timeout=300).status_code == 200
        thread = threading.Thread(target=ask_costly)
        started = time.monotonic()
        thread.start()
        # in flight, not done: on two idle cores the costly query takes about 0.45 s, so an
        # ordinary one sent 0.5 s in met no costly query at all and finished after it
        time.sleep(0.2)
        ordinary = httpx.post(f"{served.url}/query", json=question, timeout=300)
        answered = time.monotonic()
        thread.join()
        assert ordinary.status_code == 200 and costly["answer"].status_code == 200
        assert answered < costly["done"], ("the ordinary query waited for the costly one", answered - started,
                                           costly["done"] - started)
    finally:
        served.stop()


def test_workers_stop_when_their_parent_is_killed(tmp_path):
    root = quarry_store(tmp_path)
    served = Server(root, "quarry", "--workers", "2", "--pipelines", "bm25")
    workers = _children(served.proc.pid)
    assert len(workers) == 2
    os.kill(served.proc.pid, signal.SIGKILL)
    served.proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while any(_running(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    alive = [pid for pid in workers if _running(pid)]
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, "workers kept serving after their parent died"


# --- derived files: the user's own and private, or refused -----------------------------------


def _as_another_user_writable_by_all(path: Path, monkeypatch) -> None:
    """`path` writable by everyone and, under root, owned by another user."""
    os.chmod(path, 0o666)
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)


@pytest.fixture
def scratch_cache(project, tmp_path, monkeypatch, exported_model):
    """A cache of this test's own, with the default backend's exported model copied in (so
    nothing is exported again unless a test makes it)."""
    from garden.retrievers import _encoders

    cache = tmp_path / "cache"
    monkeypatch.setenv("GARDEN_CACHE", str(cache))
    models = cache / "models" / exported_model.parent.name
    models.mkdir(parents=True)
    os.chmod(cache, 0o700), os.chmod(cache / "models", 0o700), os.chmod(models, 0o700)
    (models / exported_model.name).write_bytes(exported_model.read_bytes())
    os.chmod(models / exported_model.name, 0o600)
    _encoders.ENCODERS.clear()
    yield cache
    _encoders.ENCODERS.clear()


def _dense(story: str, text: str, capsys) -> tuple[list[str], str]:
    from garden.cli import main

    capsys.readouterr()
    assert main(["query", story, text, "--pipeline", "dense", "--json", "--budget", "400"]) == 0
    out, err = capsys.readouterr()
    return [item["id"] for item in json.loads(out)["items"]], err


def _dense_fresh(project: Path, home: str, text: str) -> tuple[list[str], str]:
    """The dense packet's ids from a process of its own with a garden home of its own: no
    saved index, so the document vectors are read from the embedding cache."""
    (project / "fixtures" / "quarry.yaml").write_text(QUARRY, encoding="utf-8")
    done = subprocess.run([*GARDEN, "query", "quarry", text, "--pipeline", "dense", "--json", "--budget", "400",
                           "--include-private"],
                          cwd=project, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "GARDEN_HOME": str(project / home), "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return [item["id"] for item in json.loads(done.stdout)["items"]], done.stderr


def test_an_embedding_cache_someone_else_could_write_is_not_served(project, scratch_cache, monkeypatch):
    from garden.derived.embeddings import FILE_NAME

    question = "What did the saw blade cost?"
    expected, _ = _dense_fresh(project, "home-1", question)
    assert expected[0] == "note.saw.private"
    path = scratch_cache / "embeddings" / FILE_NAME
    with sqlite3.connect(path) as db:     # every vector swapped for one text's: a forged cache
        (vector,) = db.execute("SELECT vector FROM vectors LIMIT 1").fetchone()
        db.execute("UPDATE vectors SET vector = ?", (vector,))
    _as_another_user_writable_by_all(path, monkeypatch)
    got, err = _dense_fresh(project, "home-2", question)
    assert got == expected
    assert f"{path}: embedding cache not used:" in err and "made anew" in err
    st = os.stat(path)
    assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o600


def test_doctor_reports_an_untrusted_cache_file(project, scratch_cache, monkeypatch, capsys):
    from garden.cli import main
    from garden.derived.embeddings import FILE_NAME

    (project / "fixtures" / "quarry.yaml").write_text(QUARRY, encoding="utf-8")
    _dense("quarry", "quarry saw", capsys)
    path = scratch_cache / "embeddings" / FILE_NAME
    _as_another_user_writable_by_all(path, monkeypatch)
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert f"derived-owner-only {path}: file mode 0666" in out


def test_a_cache_of_another_schema_is_moved_aside_and_rebuilt(project, scratch_cache, capsys):
    from garden.derived.embeddings import FILE_NAME

    folder = scratch_cache / "embeddings"
    folder.mkdir(mode=0o700)
    path = folder / FILE_NAME
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
        db.execute("PRAGMA user_version = 1")
    os.chmod(path, 0o600)
    (project / "fixtures" / "quarry.yaml").write_text(QUARRY, encoding="utf-8")
    for _ in range(2):   # healed once, for good: the second run reads the new cache
        ids, err = _dense("quarry", "What happened to the saw blade?", capsys)
        assert ids
    assert (folder / f"{FILE_NAME}.other-schema").exists()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0] > 0


def _constant_model(path: Path) -> None:
    """An ONNX model with the export's inputs and output that gives every token of every text
    the same vector: a forged model."""
    import onnx
    from onnx import TensorProto, helper

    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
              for name in ("input_ids", "attention_mask", "token_type_ids")]
    output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", 384])
    nodes = [helper.make_node("Shape", ["input_ids"], ["shape2"]),
             helper.make_node("Concat", ["shape2", "dim"], ["shape3"], axis=0),
             helper.make_node("Expand", ["one", "shape3"], ["last_hidden_state"])]
    inits = [helper.make_tensor("dim", TensorProto.INT64, [1], [384]),
             helper.make_tensor("one", TensorProto.FLOAT, [1, 1, 384], [1.0] * 384)]
    graph = helper.make_graph(nodes, "forged", inputs, [output], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))


def test_a_forged_model_another_user_could_write_is_exported_again(scratch_cache, exported_model, monkeypatch,
                                                                     capsys):
    forged = scratch_cache / "models" / exported_model.parent.name / exported_model.name
    _constant_model(forged)
    _as_another_user_writable_by_all(forged, monkeypatch)
    from garden.retrievers._encoders import load_encoder
    from garden.retrievers.dense import DEFAULT_BACKEND, model_dir

    vectors = load_encoder(DEFAULT_BACKEND, model_dir()).encode(["a red kite", "the tax office"], 8)
    assert float(vectors[0] @ vectors[1]) < 0.9      # a forged model gives both one vector
    err = capsys.readouterr().err
    assert f"{forged}: exported model not used:" in err
    assert os.stat(forged).st_uid == os.geteuid() and stat.S_IMODE(os.stat(forged).st_mode) == 0o600


@pytest.mark.skipif(__import__("importlib").util.find_spec("milvus_lite") is None, reason="milvus-lite not installed")
def test_a_milvus_lite_store_is_made_owner_only_and_a_shared_one_refused(project, tmp_path, capsys):
    from garden.cli import main

    store = tmp_path / "engine" / "quarry.db"
    assert main(["query", "aurora-ridge", "gaming", "--pipeline", f"milvus-bm25:uri={store}", "--json"]) == 0
    capsys.readouterr()
    loose = [p for p in [store, *store.rglob("*")] if stat.S_IMODE(os.lstat(p).st_mode) & 0o077]
    assert store.is_dir() and not loose, loose
    os.chmod(store / "collections", 0o777)
    done = subprocess.run([*GARDEN, "query", "aurora-ridge", "gaming", "--pipeline", f"milvus-bm25:uri={store}"],
                          cwd=project, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    err = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(err) == 1, done.stderr
    assert "lets others write in it" in err[0] and str(store) in err[0]


def test_backup_leaves_a_derived_store_out_of_the_durable_part(project, tmp_path, capsys):
    from garden.cli import main

    engine = project / "fixtures" / "e.db"           # Milvus Lite's layout, made inside fixtures/
    (engine / "collections" / "c").mkdir(parents=True)
    (engine / "LOCK").write_bytes(b"")
    (engine / "collections" / "c" / "schema.json").write_text("{}")
    out = tmp_path / "b.tar.gz"
    assert main(["backup", "--out", str(out), "--pipeline", "bm25"]) == 0
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert "fixtures/aurora-ridge.yaml" in names and not any(n.startswith("fixtures/e.db") for n in names)
    capsys.readouterr()
    main(["doctor"])
    assert "advisory derived-store fixtures/e.db" in capsys.readouterr().out


# --- the LongMemEval import is bounded --------------------------------------------------------

HEAD = ('[{"question_id":"q1","question_type":"multi-session","question":"What?","answer":"x",'
        '"question_date":"2023/05/30 (Tue) 23:40","haystack_session_ids":["s1"],'
        '"haystack_dates":["2023/05/30 (Tue) 23:40"],"answer_session_ids":["s1"],"haystack_sessions":[[')


def _import_in_child(path: Path, out: Path) -> tuple[int, str, int]:
    """`garden import longmemeval PATH` in a process of its own: exit code, stderr, and the
    peak resident memory of that process in MiB."""
    # VmHWM: this process's own peak (ru_maxrss would count the parent's pages it forked from)
    code = ("import re, sys; from garden.cli import main; rc = main(['import', 'longmemeval', sys.argv[1], "
            "'--out', sys.argv[2]]); status = open('/proc/self/status').read(); "
            "print(re.search(r'VmHWM:\\s*(\\d+)', status).group(1), file=sys.stderr); sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code, str(path), str(out)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    *lines, peak = done.stderr.strip().splitlines() or ["0"]
    return done.returncode, "\n".join(lines), int(peak) // 1024


@pytest.mark.parametrize("name, turn, count", [("empty turns", "{}", 20_000_000),
                                               ("small turns", '{"role":"user","content":"x"}', 300_000)])
def test_a_small_gzip_of_a_huge_haystack_is_refused_in_bounded_memory(tmp_path, name, turn, count):
    path = tmp_path / "hostile.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(HEAD + turn)
        block = ("," + turn) * 10_000
        for _ in range(count // 10_000):
            fh.write(block)
        fh.write("]]}]")
    assert path.stat().st_size < 64 * 1024
    code, err, peak = _import_in_child(path, tmp_path / "out")
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"{path}:1:2: question #0 holds more than" in err and "sessions" in err
    assert peak < 400, f"{peak} MiB"
    assert not (tmp_path / "out").exists()


def test_a_session_past_its_turn_bound_is_a_located_line(tmp_path):
    path = tmp_path / "long.json"
    path.write_text(HEAD + ",".join(['{"role":"user","content":"hi"}'] * 1_001) + "]]}]", encoding="utf-8")
    code, err, _ = _import_in_child(path, tmp_path / "out")
    assert code == 2, err
    assert "question #0 (q1): field haystack_sessions[0]: 1,001 turns, past the 1,000 a session may hold" in err


# --- what round two left ----------------------------------------------------------------------


def _writer(path: str, size: int, stop) -> None:
    fd = os.open(path, os.O_RDWR)
    blocks, half, n = [b"a" * (size // 2), b"b" * (size // 2)], size // 2, 0
    while not stop.is_set():
        block = blocks[n % 2]
        os.pwrite(fd, block, 0)
        os.pwrite(fd, block, half)
        n += 1


def test_a_file_rewritten_in_place_while_backup_reads_it_is_never_archived_torn(project, tmp_path, capsys,
                                                                                monkeypatch):
    import multiprocessing

    import garden._files
    from garden.cli import main

    monkeypatch.setattr(garden._files, "RACY_NS", 200_000_000)   # this machine stamps times by milliseconds
    victim = project / "fixtures" / "big-attachment.txt"
    size = 1 << 20
    victim.write_bytes(b"a" * size)
    stop = multiprocessing.Event()
    writer = multiprocessing.Process(target=_writer, args=(str(victim), size, stop))
    writer.start()
    outcomes = []
    try:
        time.sleep(0.2)
        for n in range(6):
            out = tmp_path / f"b{n}.tar.gz"
            code = main(["backup", "--out", str(out), "--pipeline", "bm25"])
            err = capsys.readouterr().err
            if code != 0:
                assert code == 2 and "big-attachment.txt: changed while it was read" in err and not out.exists()
                outcomes.append("refused")
                continue
            with tarfile.open(out) as tar:
                data = tar.extractfile("fixtures/big-attachment.txt").read()
            outcomes.append("whole" if data in (b"a" * size, b"b" * size) else "torn")
    finally:
        stop.set()
        writer.join()
    assert "torn" not in outcomes, outcomes


@pytest.mark.parametrize("which", ["²", "٣", "1²", "0", "99"])
def test_capture_arguments_never_give_a_traceback(project, capsys, which):
    from garden.cli import main

    assert main(["query", "aurora-ridge", "Who sleeps in the afternoon?", "--pipeline", "bm25"]) == 0
    trace = next((project / ".garden" / "traces").glob("trace-*.jsonl"))
    judgments = project / "judgments.qrels"
    judgments.write_text("")
    capsys.readouterr()
    assert main(["capture", str(trace), "--query", which, "--judgments", str(judgments)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0] and "query" in err[0]


def test_commands_that_need_no_cache_run_without_one(project, tmp_path, monkeypatch, capsys):
    from garden.cli import main
    from garden.derived import cache

    monkeypatch.setattr(cache, "_STAND_IN", [])   # the stand-in lasts a process: this test's, here

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache would be")
    monkeypatch.setenv("GARDEN_CACHE", str(blocked))
    assert main(["generate", "tidewell", "--records", "200"]) == 0
    capsys.readouterr()
    out = tmp_path / "b.tar.gz"
    assert main(["backup", "--out", str(out), "--pipeline", "bm25"]) == 0   # a private cache stands in for its verdicts
    err = capsys.readouterr().err
    assert out.exists() and f"GARDEN_CACHE={blocked}" in err and "private cache for this run" in err
    cache._STAND_IN.clear()                                  # as a new process would start
    assert main(["query", "aurora-ridge", "gaming"]) == 2    # a command that encodes still says so at once
    assert "not a folder" in capsys.readouterr().err
    assert blocked.read_text() == "a file where the cache would be"


def test_a_model_folder_that_cannot_be_written_is_named_as_such(tmp_path):
    from other_user import give_away, model_copy, run_as_other_user, shared_folder

    root = shared_folder()
    try:
        quarry_store(root)
        model = model_copy(root)   # the checkout's own may sit where the other user cannot go
        models = root / ".cache" / "models" / "all-MiniLM-L6-v2"
        models.mkdir(parents=True)
        give_away(root)
        os.chmod(models, 0o500)
        env = {"GARDEN_HOME": str(root / ".garden"), "GARDEN_TRACE": "0", "GARDEN_CACHE": str(root / ".cache")}
        code, _, err = run_as_other_user(["query", "quarry", "quarry saw", "--pipeline", "dense"], root, env,
                                         model=model)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1, err
        assert "cannot write the exported model in" in lines[0] and "pip install" not in lines[0]
    finally:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
