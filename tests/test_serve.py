"""`garden serve` over HTTP: a real server process, driven by a real client.

One server serves a scratch copy of the shipped store for the whole module (a start costs a
few seconds: the stories are loaded and the embedding model warmed). Its packets must equal
what `garden query --json` prints for the same inputs; every bad request is one JSON error
naming its field, and the server answers the next request; a story edited on disk is read
again without a restart; the trace it writes replays under `garden compare`.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
GARDEN = [sys.executable, "-m", "garden.cli"]
START_TIMEOUT = 180   # seconds: a cold machine loads torch and the model once
GAMING = "Why have I not felt like gaming recently?"


def copy_store(root: Path) -> Path:
    for name in ("fixtures", "regression", "challenge"):
        shutil.copytree(ROOT / name, root / name)
    return root


def store_env(root: Path) -> dict:
    return {**os.environ, "GARDEN_HOME": str(root / ".garden"), "PYTHONPATH": str(ROOT)}


class Server:
    """`garden serve` as a subprocess: its URL, read from the line it prints on start."""

    def __init__(self, root: Path, *args: str, headers: dict | None = None):
        self.root = root
        self.proc = subprocess.Popen([*GARDEN, "serve", "--port", "0", *args], cwd=root, env=store_env(root),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in self.proc.stdout], daemon=True).start()
        self.stderr: list[str] = []
        threading.Thread(target=lambda: [self.stderr.append(line) for line in self.proc.stderr], daemon=True).start()
        try:
            self.banner = lines.get(timeout=START_TIMEOUT)
        except queue.Empty:
            self.stop()
            raise AssertionError(f"no start line in {START_TIMEOUT}s; stderr: {''.join(self.stderr)[-2000:]}")
        assert self.banner.startswith("garden: serving "), self.banner + "".join(self.stderr)
        self.url = self.banner.split(" on ", 1)[1].split(";")[0].split()[0]
        self.client = httpx.Client(base_url=self.url, timeout=120, headers=headers)
        try:
            assert self.client.get("/health").json()["ok"] is True
        except BaseException:   # never leave a server running behind a failed start
            self.stop()
            raise

    def post(self, body, **kw) -> httpx.Response:
        if isinstance(body, (bytes, str)):
            return self.client.post("/query", content=body, headers={"content-type": "application/json"}, **kw)
        return self.client.post("/query", json=body, **kw)

    def alive(self) -> bool:
        return self.proc.poll() is None and self.client.get("/health").json()["ok"] is True

    def stop(self) -> None:
        if getattr(self, "client", None) is not None:
            self.client.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = copy_store(tmp_path_factory.mktemp("served"))
    # a copy of a story to edit while it is served (a story's name is its file's stem)
    text = (root / "fixtures" / "kiln-lane.yaml").read_text(encoding="utf-8")
    (root / "fixtures" / "kiln-copy.yaml").write_text(text.replace("story: kiln-lane", "story: kiln-copy", 1),
                                                       encoding="utf-8")
    return root


SERVED = ["default", "default-standout", "bm25", "bm25s", "dense", "hybrid", "tfidf"]


@pytest.fixture(scope="module")
def server(store):
    served = Server(store, "--pipelines", ",".join(SERVED))
    yield served
    served.stop()


@pytest.fixture
def in_store(store, monkeypatch):
    """The test runs in the served store, with its garden home (for in-process commands)."""
    monkeypatch.chdir(store)
    monkeypatch.setenv("GARDEN_HOME", str(store / ".garden"))
    return store


def cli_json(argv: list[str], capsys) -> dict:
    """`garden ARGV` run in this process; its stdout parsed as JSON."""
    from garden.cli import main

    capsys.readouterr()
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


# --- what it serves ----------------------------------------------------------------------


def test_it_prints_where_it_serves_and_reports_health(server):
    assert server.url.startswith("http://127.0.0.1:")
    assert "aurora-ridge" in server.banner and "kiln-lane" in server.banner
    health = server.client.get("/health").json()
    assert health["ok"] is True and health["uptime_s"] > 0
    assert set(health["stories"]) == {"aurora-ridge", "kiln-lane", "kiln-copy", "linden-row", "merrowby-messages",
                                      "saltmarsh-ferry", "tern-quay"}
    assert "default" in health["pipelines"] and "bm25" in health["pipelines"]


def test_it_lists_stories_and_pipelines(server, in_store, capsys):
    stories = {row["name"]: row for row in server.client.get("/stories").json()["stories"]}
    assert stories["aurora-ridge"]["ok"] and stories["aurora-ridge"]["records"] > 0
    assert Path(stories["aurora-ridge"]["path"]) == in_store / "fixtures" / "aurora-ridge.yaml"
    described = cli_json(["pipelines", "--json"], capsys)
    served = server.client.get("/pipelines").json()
    assert list(served) == SERVED    # the operator's list, nothing else
    assert {name: served[name] for name in SERVED if name in described} == \
        {name: described[name] for name in SERVED if name in described}
    assert served["default-standout"] == "structured pipeline default on hybrid, without standout"


def test_it_describes_itself_as_openapi(server):
    doc = server.client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    assert {"/health", "/stories", "/pipelines", "/query", "/openapi.json"} <= set(doc["paths"])
    schemas = doc["components"]["schemas"]
    assert {"QueryRequest", "Error", "Packet"} <= set(schemas)
    refs = {m for m in json.dumps(doc).split('"') if m.startswith("#/components/schemas/")}
    assert {r.rsplit("/", 1)[1] for r in refs} <= set(schemas)   # every reference resolves
    # what it serves is what it describes
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    registry = Registry().with_resource("urn:served", Resource.from_contents(doc, default_specification=DRAFT202012))

    def check(name: str, value) -> None:
        schema = {"$ref": f"urn:served#/components/schemas/{name}"}
        Draft202012Validator(schema, registry=registry).validate(value)

    body = {"story": "aurora-ridge", "text": GAMING, "as_of": "2030-01-06", "budget": 800,
            "hints": {"topics": ["gaming"]}, "settings": {"standout": 1.2}, "include_private": False, "session": []}
    check("QueryRequest", body)
    check("Packet", server.post(body).json())
    check("Error", server.post({**body, "budget": 0}).json())
    check("Health", server.client.get("/health").json())
    check("Stories", server.client.get("/stories").json())


# --- the packet, as the command line prints it --------------------------------------------

QUERIES = [
    (["aurora-ridge", GAMING, "--as-of", "2030-01-06"],
     {"story": "aurora-ridge", "text": GAMING, "as_of": "2030-01-06"}),
    (["aurora-ridge", GAMING],
     {"story": "aurora-ridge", "text": GAMING}),
    (["kiln-lane", "What did the studio rent change to?", "--pipeline", "bm25", "--budget", "300"],
     {"story": "kiln-lane", "text": "What did the studio rent change to?", "pipeline": "bm25", "budget": 300}),
    (["aurora-ridge", "What did we decide about the observation log?", "--standout", "1.2", "--hint", "topic=gaming",
      "--include-private", "--as-of", "2030-01-12"],
     {"story": "aurora-ridge", "text": "What did we decide about the observation log?", "settings": {"standout": 1.2},
      "hints": {"topics": ["gaming"]}, "include_private": True, "as_of": "2030-01-12"}),
    (["saltmarsh-ferry", "What did the spring tide do?", "--pipeline", "default-standout"],
     {"story": "saltmarsh-ferry", "text": "What did the spring tide do?", "pipeline": "default-standout"}),
]


def test_the_packet_equals_garden_query_json_run_as_a_command(server, store):
    argv, body = QUERIES[0]
    done = subprocess.run([*GARDEN, "query", *argv, "--json"], cwd=store, env=store_env(store),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    served = server.post(body)
    assert served.status_code == 200, served.text
    assert served.json() == json.loads(done.stdout)
    assert served.json()["items"][0]["id"] == "state.mira.gaming"


def _with_hard_rules(body: dict) -> dict:
    """The packet a served bare pipeline gives: `garden.api.query` under it with the hard rules."""
    from garden import api
    from garden.pipelines import make_pipeline

    return api.query(body["story"], body["text"], pipeline=make_pipeline(body["pipeline"], hard_rules=True),
                     budget=body.get("budget", 1200))


@pytest.mark.parametrize("argv,body", QUERIES, ids=[q[1]["text"][:24] for q in QUERIES])
def test_every_input_gives_the_packet_the_command_gives(server, in_store, capsys, argv, body):
    expected = cli_json(["query", *argv, "--json"], capsys)
    served = server.post(body)
    assert served.status_code == 200, served.text
    if body.get("pipeline") == "bm25":   # a bare pipeline is served under the hard rules: what the API gives so
        assert expected["reason"] == "bare bm25: always retrieves"
        expected = _with_hard_rules(body)
        assert expected["reason"] == "bare bm25: always retrieves; the hard rules applied"
    assert served.json() == expected


def test_a_session_rejects_what_the_earlier_query_delivered(server, in_store):
    from garden import api

    case = api.run_case("regression/door-session.yaml")   # the same query, run as a case
    body = {"story": "saltmarsh-ferry", "text": "What did the spring tide do to the ferry cook's galley?",
            "as_of": "2031-05-20", "session": ["What did the spring tide do?"], "settings": {"standout": 1}}
    served = server.post(body).json()
    assert {r["id"]: r["reason"] for r in served["rejected"]}["note.galley.tide"] == "already_delivered"
    assert served == {k: v for k, v in case["packet"].items() if k != "fallback"}
    alone = server.post({**body, "session": []}).json()
    assert "note.galley.tide" in [item["id"] for item in alone["items"]]


def test_the_trace_line_is_the_line_the_command_writes(server, in_store, capsys):
    from garden.pipelines.traces import read_trace_lines, trace_file
    import datetime as dt

    text = "Which kiln did Wren fire first?"
    server.post({"story": "kiln-lane", "text": text, "budget": 777})
    cli_json(["query", "kiln-lane", text, "--budget", "777", "--json"], capsys)
    events = [e for _, e in read_trace_lines(trace_file(dt.date.today())) if e.query == text]
    assert len(events) == 2
    served, command = (e.model_dump(mode="json", exclude={"timings_ms"}) for e in events)
    assert served == command and served["story_path"] == str(in_store / "fixtures" / "kiln-lane.yaml")


# --- bad input and faults: one JSON error naming the field, the server unharmed -------------

OK = {"story": "aurora-ridge", "text": GAMING}
BAD = [
    (b"{not json", 400, "body"),
    (b"", 400, "body"),
    (b"\xff\xfe{}", 400, "body"),
    (b'{"text": "a", "text": "b", "story": "aurora-ridge"}', 400, "body"),
    (b'{"story": "aurora-ridge", "text": "x", "budget": NaN}', 400, "body"),
    (b"[" * 100_00 + b"]" * 100_00, 400, "body"),
    ([OK], 400, "body"),
    (b'"a string"', 400, "body"),
    (b"null", 400, "body"),
    ({**OK, "colour": "red"}, 422, "colour"),
    ({"story": "aurora-ridge"}, 422, "text"),
    ({**OK, "text": 7}, 422, "text"),
    ({**OK, "text": "   "}, 422, "text"),
    ({**OK, "text": "bell\x07"}, 422, "text"),
    ({"text": GAMING}, 422, "story"),
    ({**OK, "story": "nowhere"}, 404, "story"),
    ({**OK, "story": "../../etc/passwd"}, 404, "story"),
    ({**OK, "pipeline": "nonesuch"}, 404, "pipeline"),
    ({**OK, "pipeline": "default-nonesuch"}, 404, "pipeline"),
    ({**OK, "pipeline": "default-phrase"}, 404, "pipeline"),          # a real pipeline, not one served
    ({**OK, "pipeline": "bm25:k1=2"}, 404, "pipeline"),               # options are the operator's
    ({**OK, "pipeline": "milvus-bm25:uri=/tmp/x.db"}, 404, "pipeline"),
    ({**OK, "pipeline": "default@milvus-hybrid:uri=http://10.0.0.1:19530"}, 404, "pipeline"),
    ({**OK, "text": "x" * 2001}, 422, "text"),
    ({**OK, "session": ["x" * 2001]}, 422, "session"),
    ({**OK, "hints": {"topics": ["gaming"] * 33}}, 422, "hints"),
    ({**OK, "settings": {"candidates": 1001}}, 422, "settings"),
    ({**OK, "pipeline": "bm25", "settings": {"standout": 2}}, 422, "settings"),
    ({**OK, "settings": {"standout": 0.5}}, 422, "settings"),
    ({**OK, "settings": {"nonesuch": 1}}, 422, "settings"),
    ({**OK, "settings": [1]}, 422, "settings"),
    ({**OK, "budget": 0}, 422, "budget"),
    ({**OK, "budget": -5}, 422, "budget"),
    ({**OK, "budget": 10**12}, 422, "budget"),
    ({**OK, "budget": 12.5}, 422, "budget"),
    ({**OK, "budget": True}, 422, "budget"),
    ({**OK, "budget": "1200"}, 422, "budget"),
    ({**OK, "as_of": "2030-02-30"}, 422, "as_of"),
    ({**OK, "as_of": "10000-01-01"}, 422, "as_of"),
    ({**OK, "as_of": "20300106"}, 422, "as_of"),
    ({**OK, "as_of": 20300106}, 422, "as_of"),
    ({**OK, "hints": {"topics": "gaming"}}, 422, "hints"),
    ({**OK, "hints": {"places": ["x"]}}, 422, "hints"),
    ({**OK, "include_private": "yes"}, 422, "include_private"),
    ({**OK, "session": "earlier"}, 422, "session"),
    ({**OK, "session": [1]}, 422, "session"),
    ({**OK, "session": [""]}, 422, "session"),
    ({**OK, "session": ["q"] * 17}, 422, "session"),
]


@pytest.mark.parametrize("body,status,field", BAD, ids=[f"{n}-{b[2]}" for n, b in enumerate(BAD)])
def test_bad_input_is_one_json_error_naming_its_field(server, body, status, field):
    answer = server.post(body)
    assert answer.status_code == status, answer.text
    error = answer.json()
    assert set(error) == {"error", "field"} and error["field"] == field
    assert isinstance(error["error"], str) and "\n" not in error["error"] and "Traceback" not in error["error"]
    assert 0 < len(error["error"]) <= 1000
    assert server.alive()


def test_an_oversized_body_is_refused_by_its_length_and_by_its_bytes(server):
    big = json.dumps({**OK, "text": "x" * 70_000}).encode()
    declared = server.post(big)
    assert declared.status_code == 413 and declared.json()["field"] == "body"
    assert server.alive()

    def chunks():   # no Content-Length: sent chunked, counted as it arrives
        for start in range(0, len(big), 8192):
            yield big[start:start + 8192]

    streamed = server.client.post("/query", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413 and streamed.json()["field"] == "body"
    assert server.alive()
    # a declared length past the limit is refused from the header, before a byte of body is sent
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as raw:
        raw.sendall(b"POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 100000000\r\n\r\n")
        reply = b""
        while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
            chunk = raw.recv(65536)
            if not chunk:
                break
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413") and json.loads(body)["field"] == "body"
    assert server.alive()


def test_unknown_paths_and_methods_are_json_errors(server):
    for method, path, status in (("GET", "/nowhere", 404), ("GET", "/query", 405), ("DELETE", "/health", 405)):
        answer = server.client.request(method, path)
        assert answer.status_code == status and answer.json()["field"] is None
    assert server.alive()


def test_a_story_edited_on_disk_is_read_again_and_a_broken_edit_refused(server, store):
    path = store / "fixtures" / "kiln-copy.yaml"
    original = path.read_text(encoding="utf-8")
    question = {"story": "kiln-copy", "text": "What did Wren learn to throw on years ago?", "pipeline": "bm25"}
    try:
        before = server.post(question).json()
        assert any("kick wheel" in item["text"] for item in before["items"])
        path.write_text(original.replace("on a kick wheel", "on a treadle wheel"), encoding="utf-8")
        after = server.post(question).json()
        texts = " ".join(item["text"] for item in after["items"])
        assert "treadle wheel" in texts and "kick wheel" not in texts
        path.write_text(original.replace("at: 2032-02-20", "at: 2032-02-31", 1), encoding="utf-8")
        broken = server.post(question)
        assert broken.status_code == 422 and broken.json()["field"] == "story"
        assert "kiln-copy.yaml" in broken.json()["error"] and "2032-02-31" in broken.json()["error"]
        row = {r["name"]: r for r in server.client.get("/stories").json()["stories"]}["kiln-copy"]
        assert row["ok"] is False and "kiln-copy.yaml" in row["error"]
        assert server.alive()
        assert server.post({**question, "story": "kiln-lane"}).status_code == 200   # the others still answer
    finally:
        path.write_text(original, encoding="utf-8")
    assert server.post(question).json() == before


# --- the trace: a served day is read like any other -----------------------------------------


def test_the_served_trace_replays_under_compare(server, store):
    server.post({"story": "aurora-ridge", "text": "Where did the expedition store the observation log?"})
    traces = sorted((store / ".garden" / "traces").glob("trace-*.jsonl"))
    assert traces
    for line in traces[-1].read_bytes().splitlines():
        json.loads(line)   # every line whole
    done = subprocess.run([*GARDEN, "compare", str(traces[-1]), "--pipelines", "bm25,default", "--source", "query"],
                          cwd=store, env=store_env(store), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "distinct questions" in done.stdout


# --- where it may listen --------------------------------------------------------------------


def test_a_host_beyond_loopback_is_refused_without_the_flag(tmp_path):
    root = copy_store(tmp_path)
    done = subprocess.run([*GARDEN, "serve", "--host", "0.0.0.0", "--port", "0"], cwd=root, env=store_env(root),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("garden: --host 0.0.0.0: not a loopback address")
    assert "--allow-remote" in lines[0] and "--token-file" in lines[0]


def test_a_port_in_use_is_one_line(tmp_path):
    root = copy_store(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run([*GARDEN, "serve", "--port", str(port)], cwd=root, env=store_env(root),
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and f"--port {port}: cannot listen" in done.stderr


def test_an_unknown_story_is_refused_before_serving(tmp_path):
    root = copy_store(tmp_path)
    done = subprocess.run([*GARDEN, "serve", "nowhere", "--port", "0"], cwd=root, env=store_env(root),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no story named 'nowhere'" in done.stderr


def test_two_workers_answer_on_one_port_with_one_count_and_one_trace(tmp_path):
    root = copy_store(tmp_path)
    served = Server(root, "aurora-ridge", "--workers", "2")
    try:
        assert "with 2 workers" in served.banner
        workers = Path(f"/proc/{served.proc.pid}/task/{served.proc.pid}/children").read_text().split()
        assert len(workers) == 2
        bodies = [{"story": "aurora-ridge", "text": text} for text in
                  ("what does mira play", "why paper?", "Why have I not felt like gaming recently?")] * 4
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda body: httpx.post(f"{served.url}/query", json=body, timeout=120), bodies))
        assert [a.status_code for a in answers] == [200] * len(bodies)
        assert answers[0].json() == answers[3].json() == answers[6].json()   # whichever worker answered
        assert served.post({"story": "aurora-ridge", "text": "x", "budget": 0}).status_code == 422
        health = served.client.get("/health").json()
        assert (health["queries"], health["refused"]) == (len(bodies), 1)   # counted across both workers
        lines = [json.loads(line) for path in sorted((root / ".garden" / "traces").glob("trace-*.jsonl"))
                 for line in path.read_text(encoding="utf-8").splitlines()]
        assert len(lines) == len(bodies)
    finally:
        served.client.close()
        served.proc.terminate()
        served.proc.wait(timeout=30)
    assert served.proc.returncode == 0 and "Traceback" not in "".join(served.stderr)
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)


@pytest.mark.parametrize("argv, says", [
    (["--workers", "0"], "--workers: a whole number of processes from 1 to 64, got 0"),
    (["--workers", "2", "--mcp"], "MCP serves one client over stdio"),
])
def test_a_bad_worker_count_is_one_line(tmp_path, argv, says):
    root = copy_store(tmp_path)
    done = subprocess.run([*GARDEN, "serve", "--port", "0", *argv], cwd=root, env=store_env(root),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and says in done.stderr
    if "--mcp" in argv:   # stdout is an MCP client's: the reason goes there too, as a JSON-RPC error
        assert says in json.loads(done.stdout)["error"]["message"]
    else:
        assert done.stdout == ""


def test_loopback_names():
    from garden.serve import is_loopback

    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.10", "example.org", ""))


def test_it_stops_on_sigterm(server):
    # last in the module: the shared server is stopped here, as the fixture would
    server.client.close()
    started = time.monotonic()
    server.proc.terminate()
    server.proc.wait(timeout=30)
    assert time.monotonic() - started < 30
    assert "Traceback" not in "".join(server.stderr)
