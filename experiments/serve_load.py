"""`garden serve` under load: concurrent HTTP clients on loopback, beside the Python API.

One LoCoMo conversation (conv-47 by default) is imported into a scratch store
(`garden import locomo`), and `garden serve --workers N` (default 2, one per core) is started
on it as a subprocess. Then:

1. Start-up: from spawning the process to its first answer, twice: on a fresh garden home
   (the story's indexes built) and again after a restart (indexes saved, embeddings and the
   exported model in the user's cache: "caches warm").
2. Warm pass: every question asked once, untimed (each query's embedding cached).
3. Load: 1, 4 and 16 clients, each a thread with its own HTTP connection, take the
   questions from one shared queue until `--rounds` passes over them are asked or
   `--max-seconds` run out. Per level: requests, errors, p50 and p95 latency as the client
   sees it (send to whole response; experiments/harness/timing.py's percentile), and
   queries per second. Each worker runs one query at
   a time (see docs/serve.md), so with N clients on W workers a request waits for about
   N/W - 1 others.
4. The same questions through the Python API in this process, on the story loaded once
   (`api.query(story, ...)`, untraced): the cost of the query itself, without HTTP or the
   lock; and a few through `api.query("locomo-47", ...)`, which reads the file each call.
5. Checks: no request failed; every line of the server's trace is whole JSON, one per
   query it answered; the server's resident memory before and after the load.

    .venv/bin/python experiments/serve_load.py [--locomo FILE] [--questions N] [--rounds 1] [--max-seconds 60]
        [--workers 2] [--json FILE]

LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0; read from ../shared/data/locomo.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))

from experiments.harness.benchmarks import DEFAULTS, arguments  # noqa: E402
from experiments.harness.results import write_json  # noqa: E402
from experiments.harness.timing import percentile  # noqa: E402

CONVERSATION = DEFAULTS["locomo"] / "conv-47.json"
GARDEN = [sys.executable, "-m", "garden.cli"]
LEVELS = (1, 4, 16)
TARGETS = {"p50_ms": 30.0, "p95_ms": 80.0, "startup_s": 10.0}   # warm, 4 clients, two cores


def rss_mb(pid: int) -> float:
    """Resident memory of the process `pid` and of its children (a server's workers)."""
    total = 0
    pids = [pid, *map(int, Path(f"/proc/{pid}/task/{pid}/children").read_text().split())]
    for one in pids:
        for line in Path(f"/proc/{one}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


class Served:
    """`garden serve STORY --port 0` in `root`; its URL from the line it prints on start."""

    def __init__(self, root: Path, env: dict, story: str, workers: int = 1):
        self.started = time.perf_counter()
        self.proc = subprocess.Popen([*GARDEN, "serve", story, "--port", "0", "--workers", str(workers)],
                                     cwd=root, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        banner = self.proc.stdout.readline()
        if not banner.startswith("garden: serving"):
            self.stop()
            raise SystemExit(f"the server did not start: {banner!r}")
        self.banner_s = time.perf_counter() - self.started
        self.url = banner.split(" on ", 1)[1].split(";")[0].split()[0]

    def first_answer(self, body: dict) -> float:
        with httpx.Client(base_url=self.url, timeout=120) as client:
            client.post("/query", json=body).raise_for_status()
        return time.perf_counter() - self.started

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def load(url: str, bodies: list[dict], clients: int, rounds: int, max_seconds: float) -> dict:
    """`clients` threads asking `bodies` `rounds` times over, from one queue, within `max_seconds`."""
    work: queue.Queue = queue.Queue()
    for _ in range(rounds):
        for body in bodies:
            work.put(body)
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    deadline = time.perf_counter() + max_seconds

    def client() -> None:
        with httpx.Client(base_url=url, timeout=120) as http:
            while time.perf_counter() < deadline:
                try:
                    body = work.get_nowait()
                except queue.Empty:
                    return
                t0 = time.perf_counter()
                try:
                    answer = http.post("/query", json=body)
                    ok = answer.status_code == 200 and "decision" in answer.json()
                    problem = None if ok else f"{answer.status_code} {answer.text[:200]}"
                except httpx.HTTPError as exc:
                    problem = f"{type(exc).__name__}: {exc}"
                elapsed = time.perf_counter() - t0
                with lock:
                    latencies.append(elapsed)
                    if problem:
                        errors.append(problem)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {"clients": clients, "requests": len(latencies), "errors": len(errors), "first_error": errors[:1],
            "p50_ms": 1000 * percentile(latencies, 50), "p95_ms": 1000 * percentile(latencies, 95),
            "qps": len(latencies) / wall, "wall_s": wall}


def through_api(root: Path, story_name: str, bodies: list[dict], by_name: int) -> dict:
    """The same questions in this process: on the story loaded once (the query alone), and
    `by_name` of them by the story's name (the file read and checked on every call)."""
    from garden import api

    cwd = Path.cwd()
    os.chdir(root)
    try:
        story = api.load_story(story_name)
        for body in bodies:   # warm, as the server was
            api.query(story, body["text"], as_of=body["as_of"])
        times = []
        t_all = time.perf_counter()
        for body in bodies:
            t0 = time.perf_counter()
            api.query(story, body["text"], as_of=body["as_of"])
            times.append(time.perf_counter() - t0)
        wall = time.perf_counter() - t_all
        named = []
        for body in bodies[:by_name]:
            t0 = time.perf_counter()
            api.query(story_name, body["text"], as_of=body["as_of"])
            named.append(time.perf_counter() - t0)
    finally:
        os.chdir(cwd)
    return {"requests": len(times), "p50_ms": 1000 * percentile(times, 50),
            "p95_ms": 1000 * percentile(times, 95), "qps": len(times) / wall,
            "by_name_p50_ms": 1000 * statistics.median(named) if named else None, "by_name": len(named)}


def check_traces(home: Path) -> tuple[int, int]:
    """(whole lines, torn lines) over the server's trace files."""
    whole = torn = 0
    for path in sorted((home / "traces").glob("trace-*.jsonl")):
        for line in path.read_bytes().splitlines():
            try:
                json.loads(line)
                whole += 1
            except ValueError:
                torn += 1
    return whole, torn


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=0, help="ask the first N questions (default: all)")
    parser.add_argument("--rounds", type=int, default=1, help="passes over the questions at each level (default 1)")
    parser.add_argument("--max-seconds", type=float, default=60, help="time bound of each level (default 60)")
    parser.add_argument("--workers", type=int, default=2, help="the server's worker processes (default 2: two cores)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = arguments(parser, ("locomo",), argv, defaults={"locomo": CONVERSATION}, out=False)

    root = Path(tempfile.mkdtemp(prefix="serve-load-"))
    home = root / ".garden"
    env = {**os.environ, "GARDEN_HOME": str(home), "PYTHONPATH": str(PROJECT)}
    os.environ["GARDEN_HOME"] = str(home)   # the API half runs in this process, on the same home
    try:
        subprocess.run([*GARDEN, "import", "locomo", args.locomo, "--out", str(root)], cwd=root, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        from garden.evaluation.locomo import load_conversations

        conv = load_conversations(root)[0]
        story_name = conv.story.story
        questions = conv.questions[:args.questions] if args.questions else conv.questions
        bodies = [{"story": story_name, "text": q.text, "as_of": q.as_of.isoformat()} for q in questions]
        print(f"{story_name}: {len(conv.story.records)} records, {len(bodies)} questions; "
              f"{os.cpu_count()} cores; levels {', '.join(map(str, LEVELS))} clients, {args.rounds} rounds each, "
              f"at most {args.max_seconds:g} s a level")

        cold = Served(root, env, story_name, args.workers)
        cold_first = cold.first_answer(bodies[0])
        cold.stop()
        served = Served(root, env, story_name, args.workers)
        warm_first = served.first_answer(bodies[0])
        try:
            for body in bodies:   # the warm pass
                httpx.post(f"{served.url}/query", json=body, timeout=120).raise_for_status()
            rss_before = rss_mb(served.proc.pid)
            levels = [load(served.url, bodies, n, args.rounds, args.max_seconds) for n in LEVELS]
            rss_after = rss_mb(served.proc.pid)
            answered = httpx.get(f"{served.url}/health", timeout=30).json()["queries"]
        finally:
            served.stop()
        api_figures = through_api(root, story_name, bodies, by_name=5)
        whole, torn = check_traces(home)
        expected = 1 + answered   # the cold server's first answer, then every answer of the warm one
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print()
    print(f"start-up to first answer: {cold_first:.1f} s on a fresh garden home (indexes built), "
          f"{warm_first:.1f} s with caches warm (banner after {served.banner_s:.1f} s); target <= "
          f"{TARGETS['startup_s']:g} s")
    print()
    print("| clients | requests | errors | p50 ms | p95 ms | queries/s |")
    print("|--------:|---------:|-------:|-------:|-------:|----------:|")
    for row in levels:
        print(f"| {row['clients']} | {row['requests']} | {row['errors']} | {row['p50_ms']:.1f} | "
              f"{row['p95_ms']:.1f} | {row['qps']:.1f} |")
    print(f"| API, in process (story loaded once, untraced) | {api_figures['requests']} | 0 | "
          f"{api_figures['p50_ms']:.1f} | {api_figures['p95_ms']:.1f} | {api_figures['qps']:.1f} |")
    print()
    print(f"api.query by the story's name (file read and checked each call): p50 "
          f"{api_figures['by_name_p50_ms']:.0f} ms over {api_figures['by_name']} questions")
    four = next(row for row in levels if row["clients"] == 4)
    verdict = lambda ok: "met" if ok else "missed"   # noqa: E731
    print(f"targets, 4 clients: p50 {four['p50_ms']:.1f} ms <= {TARGETS['p50_ms']:g}: "
          f"{verdict(four['p50_ms'] <= TARGETS['p50_ms'])}; p95 {four['p95_ms']:.1f} ms <= {TARGETS['p95_ms']:g}: "
          f"{verdict(four['p95_ms'] <= TARGETS['p95_ms'])}; start-up {warm_first:.1f} s <= {TARGETS['startup_s']:g}: "
          f"{verdict(warm_first <= TARGETS['startup_s'])}")
    print(f"errors: {sum(row['errors'] for row in levels)}; trace lines: {whole} whole, {torn} torn "
          f"(expected {expected} whole: {'ok' if whole == expected and not torn else 'MISMATCH'})")
    print(f"server RSS: {rss_before:.0f} MB before the load, {rss_after:.0f} MB after")
    if args.json:
        write_json(args.json, {
            "story": story_name, "questions": len(bodies), "cold_first_answer_s": cold_first,
            "warm_first_answer_s": warm_first, "levels": levels, "api": api_figures, "trace_whole": whole,
            "trace_torn": torn, "trace_expected": expected, "rss_mb_before": rss_before, "rss_mb_after": rss_after})
    return 0 if not any(row["errors"] for row in levels) and whole == expected and not torn else 1


if __name__ == "__main__":
    sys.exit(main())
