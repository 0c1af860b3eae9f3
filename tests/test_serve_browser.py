"""A served garden against a web page, in a real browser (headless Chromium, as
tests/test_explore_browser.py drives it): a page from another origin can neither read a
packet nor make the server run a query, by a cross-site request or by DNS rebinding.

Rebinding is played out as the server sees it: the page is loaded from `rebind.test:PORT`
(Chromium told that the name is 127.0.0.1), and every later connection to that port is
passed on, byte for byte, to the garden's port, as if the name had been pointed at the
garden after the page loaded. The page's requests are then same-origin to the browser and
reach the garden with `Host: rebind.test:PORT`.
"""
from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from browser import start_chromium
from test_hostile_round_three import quarry_store
from test_serve import Server

ATTACK = """<!doctype html><html><body><script>
async function attempt(url, init) {
  try {
    const answer = await fetch(url, init);
    const text = await answer.text();
    return {status: answer.status, text: text};
  } catch (error) {
    return {blocked: String(error)};
  }
}
(async () => {
  const query = JSON.stringify({text: "What happened to the quarry saw blade?", pipeline: "bm25"});
  const results = {
    plain: await attempt(TARGET + "/query", {method: "POST", headers: {"Content-Type": "text/plain"}, body: query}),
    json: await attempt(TARGET + "/query", {method: "POST", headers: {"Content-Type": "application/json"},
                                            body: query}),
  };
  document.body.setAttribute("data-results", JSON.stringify(results));
})();
</script></body></html>"""


def _page(target: str) -> bytes:
    body = ATTACK.replace("TARGET", json.dumps(target)).encode()
    return (b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"
            % (len(body), body))


class AttackerPort:
    """A port that serves the attacking page to `GET /` and passes every other request on,
    unchanged, to `forward` (a port of 127.0.0.1), or answers it 404 when there is none."""

    def __init__(self, target: str, forward: int | None = None):
        self.page, self.forward = _page(target), forward
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            head = conn.recv(65536)
            if head.startswith(b"GET / ") or self.forward is None:
                conn.sendall(self.page if head.startswith(b"GET / ") else
                             b"HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n")
                return
            with socket.create_connection(("127.0.0.1", self.forward)) as garden:
                garden.sendall(head)
                conn.settimeout(1.0)
                garden.settimeout(30)
                # the rest of the request (if any), then the answer, passed on as they come
                while True:
                    try:
                        more = conn.recv(65536)
                    except socket.timeout:
                        break
                    if not more:
                        break
                    garden.sendall(more)
                    if b"\r\n\r\n" in head + more:
                        break
                while chunk := garden.recv(65536):
                    conn.sendall(chunk)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = quarry_store(tmp_path_factory.mktemp("browser-quarry"))
    server = Server(root, "quarry", "--pipelines", "bm25")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = start_chromium(tmp_path_factory.mktemp("chromium-serve-profile"),
                            ("--host-resolver-rules=MAP rebind.test 127.0.0.1",))
    yield driver
    driver.quit()


def _results(driver, url: str) -> dict:
    driver.get(url)
    deadline = time.monotonic() + 30
    while (raw := driver.execute_script("return document.body && document.body.getAttribute('data-results')")) \
            is None:
        assert time.monotonic() < deadline, "the page never finished its requests"
        time.sleep(0.05)
    return json.loads(raw)


def _trace_lines(root: Path) -> int:
    return sum(len(p.read_bytes().splitlines()) for p in (root / ".garden" / "traces").glob("trace-*.jsonl"))


def _no_packet(result: dict) -> None:
    assert "items" not in result.get("text", ""), result


def test_a_page_of_another_origin_can_neither_read_nor_run_a_query(served, browser):
    before, lines = served.client.get("/health").json()["queries"], _trace_lines(served.root)
    attacker = AttackerPort(served.url)
    try:
        results = _results(browser, f"http://127.0.0.1:{attacker.port}/")
    finally:
        attacker.close()
    for result in results.values():   # the answer is not the page's to read, and it holds no packet
        assert "blocked" in result, results
    assert served.client.get("/health").json()["queries"] == before and _trace_lines(served.root) == lines


def test_a_rebinding_page_is_refused_by_its_host(served, browser):
    before, lines = served.client.get("/health").json()["queries"], _trace_lines(served.root)
    attacker = AttackerPort("", forward=int(served.url.rsplit(":", 1)[1]))
    try:
        results = _results(browser, f"http://rebind.test:{attacker.port}/")
    finally:
        attacker.close()
    assert results["json"]["status"] == 403, results       # same-origin to the browser: it reads the refusal
    assert json.loads(results["json"]["text"])["field"] == "Host"
    assert results["plain"]["status"] == 403
    for result in results.values():
        _no_packet(result)
    assert served.client.get("/health").json()["queries"] == before and _trace_lines(served.root) == lines
