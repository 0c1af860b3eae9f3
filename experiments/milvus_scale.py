"""The Milvus cost table: ingest, query latency and peak memory of `default` on Milvus, beside in-process `default`.

Per size, on the generated stories of experiments/scale.py (seed 7; its folder of stores is
shared, `--stores`, so neither script generates a store the other made):

- encode: in-process `dense` indexes the story, in a process of its own, so the user's
  embedding cache holds its vectors. The first ever run at a size encodes them (timed, and
  kept beside the story as scale.py keeps it); later runs read them. Every index below then
  reads the cache, so what it times is the engine's own work;
- ingest, each configuration in a process of its own, so its peak resident set
  (`ru_maxrss`) is that configuration's alone: the base retriever's two members indexed one
  after the other, each timed: `bm25` and `dense` in the garden's process (`default`'s
  `hybrid`); `milvus-bm25` and `milvus-dense` into a fresh Milvus Lite store under a
  temporary garden home (embedded: served from inside the garden's process); the same into a
  `milvus-lite server` on loopback, started for the size on a fresh data folder (or the
  server `GARDEN_MILVUS_SERVER` names). Then every generated case's queries once under the
  structured pipeline on that base, so the peak includes answering;
- latency, in one more process: `default`, `default@milvus-hybrid` and
  `default@milvus-hybrid:uri=SERVER`, made by name as a user makes them (the Milvus ones find
  the collections built above), one untimed pass, then `--rounds` rounds interleaved query
  by query, so a slow moment of a shared machine falls on all three. The untimed pass also
  says whether each passes the generated cases, and whether the packets and the top five
  candidates agree with `default`'s;
- with `--configurations ...,stored`: the story itself ingested into Milvus on the server
  (garden.store.milvus.ingest, in a process of its own, each part timed), then queried by
  `default` in another process that never reads the story's file (opening the stored
  story, one untimed pass, `--rounds` rounds): that process's peak memory is the garden's
  side of a store in Milvus;
- `standalone`: the same on a Milvus standalone (PyPI `milvus`, Milvus 2.3's C++ engine,
  garden/retrievers/_milvus_standalone.py) started for the size on a fresh data folder (or
  the one `GARDEN_MILVUS_STANDALONE` names): `milvus-dense` builds an HNSW index there, and
  the lexical member is `bm25` in the garden's process (Milvus 2.3 has no BM25 function);
  Milvus's part is timed by phase (insert, flush, index build, load);
- `standalone stored`: the story itself ingested into Milvus on that standalone, as `stored`
  does on the server (its `bm25` indexed at ingest, saved, and read mapped by the query
  process), then queried in a process of its own: the garden's side of a story in Milvus
  when the engine builds real indexes;
- `--random-vectors-above N`: a size past N takes random unit vectors (one per text, seeded
  by its sha256) for every record in every process instead of the model's, for latency
  alone: nothing is encoded and the embedding cache is neither read nor written. Every row
  and note of such a size says so; its agreement and cases passed compare pipelines on the
  same random vectors, not rankings;
- `--retriever milvus-bm25` stands everything on `bm25` and `milvus-bm25` instead, with no
  encoding (a million records);
- the server's peak resident set (VmHWM) is read from /proc when this script started it
  (a standalone's: its engine's, the largest process it runs).

Every process reads the cases with the records they name checked against the story it
holds (`case_queries`), not against the story's file parsed again per case file.

Each size's homes, Milvus Lite store and server data are made under `--work` and removed
when the size is done; the figures are kept in `--work`/milvus_scale.json (`--again` shows
its table).

    .venv/bin/python experiments/milvus_scale.py [--sizes 10000,100000] [--rounds 3] [--json] [--work DIR]
        [--retriever milvus-bm25] [--configurations "in process,embedded,server,standalone,stored,standalone stored"]
        [--random-vectors-above 10000]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:  # run as a script: the project's packages by name
    sys.path.insert(0, str(PROJECT))

from experiments.harness.results import write_json  # noqa: E402
from experiments.harness.stories import SEED, WORK as SCALE_WORK, case_queries, story_at  # noqa: E402
from experiments.harness.timing import peak_mb, query_rounds, spread, timed  # noqa: E402
from garden.retrievers.milvus import start_local_server, start_standalone, stop_local_server  # noqa: E402

WORK = PROJECT / "experiments" / "out" / "milvus_scale"
CONFIGURATIONS = ("in process", "embedded", "server", "standalone")
DEFAULT_CONFIGURATIONS = ("in process", "embedded", "server")
STANDALONE = "standalone"  # a Milvus standalone: real indexes (HNSW), the lexical member bm25 in process
STORED = "stored"  # the story itself in Milvus (garden.store.milvus), on the server
STANDALONE_STORED = "standalone stored"  # the story itself in Milvus on the standalone, bm25 read mapped
STORIES_IN_MILVUS = (STORED, STANDALONE_STORED)
RANDOM = "random unit vectors, for latency only"  # the label of a size whose vectors are not the model's
IN_PROCESS = {"milvus-hybrid": "hybrid", "milvus-bm25": "bm25"}  # the in-process twin of each Milvus base
FIRST_ENCODING = "dense-first-encoding.json"  # scale.py's marker beside the story: the one-time encoding
TOP = 5  # the candidates compared between pipelines
RECALL_AT = 100  # HNSW's recall against exact search is read at this depth
RECORD_QUERIES = 200  # record texts asked as queries beside the cases' for recall
TIE = 1e-5  # a hit this close to the exact RECALL_AT-th score is tied with it


def base_retriever(configuration: str, uri: str | None, timeout: float | None, retriever: str = "milvus-hybrid",
                   standalone: str | None = None) -> str:
    """The base retriever's spec under `default` for a configuration."""
    if configuration == "in process":
        return IN_PROCESS[retriever]
    spec = retriever
    if configuration in ("server", STORED):
        spec += f":uri={uri}"
    elif configuration in (STANDALONE, STANDALONE_STORED):
        spec += f":uri={standalone}"
    return spec + (f":timeout={timeout:g}" if timeout else "")


def pipeline_name(base: str) -> str:
    return "default" if base == "hybrid" else f"default@{base}"


def _use_home(home: Path) -> None:
    """This process's garden home; no trace written: the runs are measurements, not queries to keep."""
    os.environ["GARDEN_HOME"] = str(home)
    os.environ["GARDEN_TRACE"] = "0"


def random_vector(text: str, width: int) -> np.ndarray:
    """A unit vector of `width` drawn from a generator seeded by the text's sha256: the same
    text gets the same vector in every process, and no model is run."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(width).astype(np.float32)
    return vector / np.linalg.norm(vector)


def use_random_vectors() -> None:
    """Every document embedding of this process a `random_vector` (queries keep the model's):
    for latency past the largest size encoded. The embedding cache is not touched."""
    from garden.retrievers.dense import DenseRetriever, model_width

    def embeddings(self, texts):
        width = model_width(self.model_path)
        return np.stack([random_vector(t, width) for t in texts]) if texts else np.zeros((0, 0), np.float32)

    DenseRetriever.embeddings = embeddings


# --- the processes of one size -------------------------------------------------------------

def encode(size: int, stores: Path, home: Path) -> dict:
    """In-process `dense` on the story: fills the user's embedding cache, so every later index
    reads it. The first encoding at a size is kept beside the story (scale.py's marker)."""
    _use_home(home)
    from garden.pipelines.indexes import documents
    from garden.formats.stories import load_story
    from garden.retrievers import make_retriever

    story_path, _ = story_at(size, stores)
    docs = documents(load_story(story_path))
    dense = make_retriever("dense")
    seconds, _ = timed(lambda: dense.index(docs))
    marker = story_path.parents[1] / FIRST_ENCODING
    if dense.encoded and not marker.exists():
        marker.write_text(json.dumps({"seconds": seconds, "encoded": dense.encoded}))
    first = json.loads(marker.read_text()) if marker.exists() else {}
    return {"records": len(docs), "seconds": seconds, "encoded": dense.encoded, "first_encoding": first}


def _prebuilt(base: str, retriever):
    """An index cache that hands the pipeline the base retriever this process indexed (and
    timed member by member) itself; every other index (the phrase index) as usual."""
    from garden.pipelines.indexes import IndexCache

    class Prebuilt(IndexCache):
        def retriever(self, story, name):
            return retriever if name == base else super().retriever(story, name)

    return Prebuilt()


def ingest(size: int, configuration: str, uri: str | None, timeout: float | None, stores: Path, home: Path,
           retriever: str = "milvus-hybrid", standalone: str | None = None) -> dict:
    """One configuration alone: its members indexed (each timed), then every case's query
    once through the structured pipeline on it; the process's peak memory."""
    _use_home(home)
    from garden.pipelines.indexes import documents
    from garden.formats.stories import load_story
    from garden.pipelines import structured_pipeline
    from garden.retrievers import make_retriever

    story_path, cases_dir = story_at(size, stores)
    story = load_story(story_path)
    docs = documents(story)
    base = base_retriever(configuration, uri, timeout, retriever, standalone)
    retriever = make_retriever(base)
    if hasattr(retriever, "settle"):  # the lexical member the engine allows (bm25 in process on Milvus 2.3)
        retriever.settle()
    members = {}
    for name, member in retriever.members().items():
        seconds, _ = timed(lambda: member.index(docs))
        members[name] = {"seconds": seconds, "rows": getattr(member, "inserted", None),
                         "encoded": getattr(member, "encoded", None), "phases": getattr(member, "build_s", None),
                         "index": getattr(member, "index_type", None)}
    pipeline = structured_pipeline(pipeline_name(base), indexes=_prebuilt(base, retriever))
    specs, _ = case_queries(cases_dir, story, story_path)
    answering, _ = timed(lambda: [pipeline.run(spec) for spec in specs])
    return {"base": base, "members": members, "queries": len(specs), "answer_all_s": answering,
            "peak_mb": peak_mb()}


def _top(outcome) -> frozenset[str]:
    return frozenset(c["id"] for c in outcome.stages.get("candidates", [])[:TOP])


def _agreement(runs: dict[str, list], reference: str) -> dict[str, dict[str, float]]:
    """For each pipeline, the share of queries whose packet (ids in order) and whose top
    TOP candidates (as a set) are `reference`'s."""
    ref = runs[reference]
    return {name: {"same_packet": sum(a.packet.ids() == b.packet.ids() for a, b in zip(outcomes, ref)) / len(ref),
                   f"same_top{TOP}": sum(_top(a) == _top(b) for a, b in zip(outcomes, ref)) / len(ref)}
            for name, outcomes in runs.items()}


def latency(size: int, uri: str | None, timeout: float | None, rounds: int, stores: Path, home: Path,
            retriever: str = "milvus-hybrid", configurations=DEFAULT_CONFIGURATIONS,
            standalone: str | None = None) -> dict:
    """The three pipelines in one process, by name: one untimed pass (cases passed,
    agreement), then `rounds` rounds interleaved query by query."""
    _use_home(home)  # the embedded configuration's home: its store holds the collections
    from garden.formats.cases import check
    from garden.formats.stories import load_story
    from garden.pipelines import make_pipeline

    story_path, cases_dir = story_at(size, stores)
    story = load_story(story_path)
    specs, expects = case_queries(cases_dir, story, story_path)
    names = {c: pipeline_name(base_retriever(c, uri, timeout, retriever, standalone)) for c in configurations}
    pipelines = {c: make_pipeline(name) for c, name in names.items()}
    runs = {c: [p.run(spec) for spec in specs] for c, p in pipelines.items()}  # untimed: warm
    cases = {case for case, _ in expects}
    passed = {}
    for c, outcomes in runs.items():
        failed = {case for spec, outcome, (case, expect) in zip(specs, outcomes, expects)
                  if check(expect, outcome.packet, story, spec.include_private)}
        passed[c] = {"passed": len(cases - failed), "of": len(cases)}
    times, stages = query_rounds(rounds, specs, pipelines)
    return {"pipelines": names, "queries": len(specs), "rounds": rounds,
            "query_ms": {c: spread(v) for c, v in times.items()},
            "stage_ms": {c: {s: spread(v) for s, v in by.items()} for c, by in stages.items()},
            "cases_passed": passed,
            "agreement": _agreement(runs, "in process"),
            "embedded_vs_server": _agreement(runs, "embedded")["server"] if "embedded" in runs and "server" in runs
            else None,
            "packets": {c: [o.packet.ids() for o in outcomes] for c, outcomes in runs.items()},
            "top": {c: [sorted(_top(o)) for o in outcomes] for c, outcomes in runs.items()},
            "peak_mb": peak_mb(),
            **({f"recall@{RECALL_AT}": hnsw_recall(story, [spec.query for spec in specs], standalone)}
               if STANDALONE in configurations and retriever == "milvus-hybrid" else {})}


def hnsw_recall(story, queries: list[str], standalone: str) -> dict:
    """`milvus-dense`'s top RECALL_AT on the standalone (its HNSW index) against exact
    search of the same vectors in process (`dense`), over the cases' queries and over
    RECORD_QUERIES record texts spread through the story: the share of each exact top it
    finds (`set`), and the share of its hits scoring at least the exact RECALL_AT-th score
    less TIE (`ties`: a record tied with one the exact search kept counts, as in
    ann-benchmarks' recall). After the timed rounds, so it times nothing."""
    from garden.pipelines.indexes import documents
    from garden.retrievers import make_retriever

    docs = documents(story)
    exact, approximate = make_retriever("dense"), make_retriever(f"milvus-dense:uri={standalone}")
    exact.index(docs)
    approximate.index(docs)  # finds the collection the ingest built
    spread = [d.text for d in docs[::max(1, len(docs) // RECORD_QUERIES)]][:RECORD_QUERIES]
    out = {"index": approximate.index_type, "ef": approximate.ef}
    for label, asked in (("cases", queries), ("records", spread)):
        found = tied = total = 0
        for query in asked:
            wanted = exact.top(query, RECALL_AT)
            hits = approximate.top(query, RECALL_AT)
            found += len({rid for rid, _ in wanted} & {rid for rid, _ in hits})
            tied += min(len(wanted), sum(score >= wanted[-1][1] - TIE for _, score in hits)) if wanted else 0
            total += len(wanted)
        out[label] = {"queries": len(asked), "set": found / max(1, total), "ties": tied / max(1, total)}
    return out


def stored_ingest(size: int, retriever: str, uri: str, stores: Path, home: Path) -> dict:
    """The story streamed into Milvus on the server (garden.store.milvus.ingest), alone
    in this process: each part's seconds and the process's peak memory."""
    _use_home(home)
    from garden.store.milvus import ingest

    story_path, _ = story_at(size, stores)
    seconds, done = timed(lambda: ingest(story_path, retriever, uri))
    return {"seconds": seconds, **done, "peak_mb": peak_mb()}


def stored_latency(size: int, retriever: str, uri: str, rounds: int, stores: Path, home: Path) -> dict:
    """`default` on the story in Milvus, in a process that never reads the story's file:
    opening it (its saved tables), one untimed pass (cases passed, packets), then `rounds`
    rounds; the process's peak memory is the garden's side of a store in Milvus."""
    _use_home(home)
    from garden.store.milvus import stored_story
    from garden.formats.cases import check
    from garden.pipelines import make_pipeline

    story_path, cases_dir = story_at(size, stores)
    opened, story = timed(lambda: stored_story(story_path.stem))
    specs, expects = case_queries(cases_dir, story, story_path)
    name = pipeline_name(base_retriever(STORED, uri, None, retriever))  # uri: the server's or the standalone's
    pipeline = make_pipeline(name)
    first, outcomes = timed(lambda: [pipeline.run(spec) for spec in specs])
    failed = {case for spec, outcome, (case, expect) in zip(specs, outcomes, expects)
              if check(expect, outcome.packet, story, spec.include_private)}
    cases = {case for case, _ in expects}
    by_name, by_stage = query_rounds(rounds, specs, {name: pipeline})
    times, stages = by_name[name], by_stage[name]
    return {"pipeline": name, "open_s": opened, "first_pass_s": first, "queries": len(specs), "rounds": rounds,
            "query_ms": spread(times), "stage_ms": {s: spread(v) for s, v in stages.items()},
            "cases_passed": {"passed": len(cases - failed), "of": len(cases)},
            "packets": [o.packet.ids() for o in outcomes], "top": [sorted(_top(o)) for o in outcomes],
            "peak_mb": peak_mb()}


# --- the server ------------------------------------------------------------------------------

def _descendants(pid: int) -> list[int]:
    """`pid` and the processes descended from it, from /proc."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found = [pid]
    for one in found:
        found += [child for child, parent in parents.items() if parent == one]
    return found


def engine_memory_mb(pid: int) -> dict[str, float]:
    """The peak and current resident set of the largest process `pid` runs (a standalone's
    engine, under its relay), from /proc."""
    figures = [server_memory_mb(one) for one in _descendants(pid)]
    return max(figures, key=lambda f: f.get("peak_mb") or 0.0, default={})


def server_memory_mb(pid: int) -> dict[str, float]:
    """The server's peak and current resident set, from /proc (kB there)."""
    fields = {}
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            fields[key] = int(value.split()[0]) / 1024
    return {"peak_mb": fields.get("VmHWM"), "rss_mb": fields.get("VmRSS")}


# --- one size, each part in a process of its own ---------------------------------------------

def _child(*args: str) -> dict:
    """This script with `args` in a new process: its JSON, or the error it died with."""
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args],
                          capture_output=True, text=True, cwd=PROJECT)
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-2000:] or f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _say(text: str) -> None:
    print(time.strftime("%H:%M:%S"), text, file=sys.stderr, flush=True)


def one_size(size: int, rounds: int, work: Path, stores: Path, timeout: float | None,
             retriever: str = "milvus-hybrid", configurations=DEFAULT_CONFIGURATIONS,
             random_above: int | None = None) -> dict:
    """Every figure of one size: encode, each configuration's ingest, latency, the servers'
    memory. A part that fails is kept as its error; the rest are still measured."""
    started = time.perf_counter()
    story_at(size, stores)
    work.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"r{size}-", dir=work))
    random = random_above is not None and size > random_above
    common = ["--size", str(size), "--stores", str(stores), "--retriever", retriever] + (
        ["--timeout", str(timeout)] if timeout else []) + (["--random-vectors"] if random else [])
    out: dict = {"records": size, "retriever": retriever, "configurations": list(configurations),
                 "vectors": RANDOM if random else "all-MiniLM-L6-v2"}
    timed = [c for c in configurations if c not in STORIES_IN_MILVUS]
    proc = standalone_proc = None
    uri = standalone = None
    try:
        if retriever == "milvus-hybrid" and not random:
            _say(f"{size:,}: encode")
            out["encode"] = _child("--part", "encode", "--home", str(scratch / "home-encode"), *common)
        if {"server", STORED} & set(configurations):
            uri = os.environ.get("GARDEN_MILVUS_SERVER")
            if not uri:  # its log is kept after the run
                proc, uri = start_local_server(scratch / "server-data", work / f"server-{size}.log")
            out["server"] = {"uri": uri, "started_here": proc is not None}
        if {STANDALONE, STANDALONE_STORED} & set(configurations):
            standalone = os.environ.get("GARDEN_MILVUS_STANDALONE")
            if not standalone:
                _say(f"{size:,}: starting a Milvus standalone")
                standalone_proc, standalone = start_standalone(scratch / "standalone-data",
                                                               work / f"standalone-{size}.log")
            out["standalone"] = {"uri": standalone, "started_here": standalone_proc is not None}
        where = (["--uri", uri] if uri else []) + (["--standalone", standalone] if standalone else [])
        out["ingest"] = {}
        for configuration in timed:
            _say(f"{size:,}: ingest, {configuration}")
            home = scratch / f"home-{configuration.replace(' ', '-')}"  # home-embedded: the latency part's too
            out["ingest"][configuration] = _child("--part", "ingest", "--configuration", configuration,
                                                  "--home", str(home), *where, *common)
        if timed:
            _say(f"{size:,}: latency, {rounds} rounds")
            out["latency"] = _child("--part", "latency", "--rounds", str(rounds), "--configurations", ",".join(timed),
                                    "--home", str(scratch / "home-embedded"), *where, *common)
        for configuration, on in ((STORED, uri), (STANDALONE_STORED, standalone)):
            if configuration not in configurations:
                continue
            home = scratch / f"home-{configuration.replace(' ', '-')}"
            _say(f"{size:,}: the story into Milvus ({configuration})")
            out["ingest"][configuration] = _child("--part", "stored-ingest", "--uri", on, "--home", str(home),
                                                  *common)
            _say(f"{size:,}: {configuration}, {rounds} rounds")
            out[configuration] = _child("--part", "stored-latency", "--uri", on, "--rounds", str(rounds),
                                        "--home", str(home), *common)
        if proc is not None:
            out["server"].update(server_memory_mb(proc.pid))
        if standalone_proc is not None:
            out["standalone"].update(engine_memory_mb(standalone_proc.pid))
    finally:
        for started_here in (proc, standalone_proc):
            if started_here is not None:
                stop_local_server(started_here)
        shutil.rmtree(scratch, ignore_errors=True)  # the temporary homes, the store and the servers' data
    out["wall_s"] = time.perf_counter() - started
    _say(f"{size:,}: done in {out['wall_s']:.0f} s")
    return out


# --- the table -----------------------------------------------------------------------------

HEADER = ("| records | pipeline | index lexical s | index dense s | query p50 ms | query p95 ms | p50 x default "
          f"| same top-{TOP} as default | same packet as default "
          "| cases passed | peak MB, garden | peak MB, server |")


def _cell(value, fmt: str | None = None) -> str:
    """A figure as the table shows it: three significant digits, whole numbers from 100 up."""
    if value is None:
        return "-"
    return (fmt or ("{:,.0f}" if abs(value) >= 100 else "{:.3g}")).format(value)


def _shown(name: str) -> str:
    """A pipeline's name without this run's port."""
    return re.sub(r"(://127\.0\.0\.1):[0-9]+", r"\1:PORT", name)


def _stored_row(result: dict, configuration: str = STORED) -> str:
    """The row of the story in Milvus: its ingest (the members' parts), its own latency
    process, and its packets against in-process `default`'s."""
    made, mine, lat = result["ingest"].get(configuration, {}), result.get(configuration, {}), result.get("latency", {})
    where = "story in Milvus" + (", standalone" if configuration == STANDALONE_STORED else "")
    name = f"`{_shown(mine.get('pipeline', configuration))}` ({where})"
    failed = made.get("error") or mine.get("error")
    if failed:
        return f"| {_records(result)} | {name} | failed: {failed.splitlines()[-1][:160]} |"
    parts = made.get("timings", {})
    lexical, dense = parts.get("milvus-bm25_s", parts.get("bm25_s")), parts.get("milvus-dense_s")
    ref = lat.get("query_ms", {}).get("in process")
    theirs = (lat.get("packets") or {}).get("in process")
    tops = (lat.get("top") or {}).get("in process")
    rows = made.get("inserted", {}).get("records")
    ms = mine["query_ms"]
    server = result.get("standalone" if configuration == STANDALONE_STORED else "server", {}).get("peak_mb")
    return " | ".join([
        f"| {_records(result)}", name, _cell(lexical) + (f" ({rows:,} records)" if rows is not None else ""),
        _cell(dense), _cell(ms["p50"]), _cell(ms["p95"]), _cell(ref and ms["p50"] / ref["p50"], "{:.1f}"),
        _cell(tops and sum(a == b for a, b in zip(mine["top"], tops)) / len(tops), "{:.0%}"),
        _cell(theirs and sum(a == b for a, b in zip(mine["packets"], theirs)) / len(theirs), "{:.0%}"),
        f"{mine['cases_passed']['passed']}/{mine['cases_passed']['of']}",
        _cell(mine["peak_mb"], "{:,.0f}"), _cell(server, "{:,.0f}") + " |"])


def _records(result: dict) -> str:
    """The size as a row shows it, with the label of random vectors where they stood in."""
    return f"{result['records']:,}" + (" (random vectors)" if result.get("vectors") == RANDOM else "")


def _row(result: dict, configuration: str) -> str:
    if configuration in STORIES_IN_MILVUS:
        return _stored_row(result, configuration)
    made, lat = result["ingest"].get(configuration, {}), result.get("latency", {})
    where = "" if configuration == "in process" else f" ({configuration})"
    name = f"`{_shown(lat.get('pipelines', {}).get(configuration, configuration))}`{where}"
    if "error" in made:
        return f"| {_records(result)} | {name} | failed: {made['error'].splitlines()[-1][:160]} |"
    lexical, dense = (list(made["members"].values()) + [{"seconds": None}])[:2]
    ms = lat.get("query_ms", {})
    mine, ref = ms.get(configuration), ms.get("in process")
    agree = lat.get("agreement", {}).get(configuration, {})
    passed = lat.get("cases_passed", {}).get(configuration)
    server = result.get(configuration, {}).get("peak_mb") if configuration in ("server", STANDALONE) else None
    rows = f" ({lexical['rows']:,} rows)" if lexical.get("rows") is not None else ""
    return " | ".join([
        f"| {_records(result)}", name, _cell(lexical["seconds"]) + rows, _cell(dense["seconds"]),
        _cell(mine and mine["p50"]), _cell(mine and mine["p95"]),
        _cell(mine and ref and mine["p50"] / ref["p50"], "{:.1f}"),
        _cell(agree.get(f"same_top{TOP}"), "{:.0%}"),
        _cell(agree.get("same_packet"), "{:.0%}"),
        f"{passed['passed']}/{passed['of']}" if passed else "-",
        _cell(made["peak_mb"], "{:,.0f}"), _cell(server, "{:,.0f}") + " |"])


def table(report: dict) -> str:
    rows = [HEADER, "|" + "---|" * (HEADER.count("|") - 1)]
    for result in report["results"]:
        rows += [_row(result, c) for c in result.get("configurations", DEFAULT_CONFIGURATIONS)]
    return "\n".join(rows)


def notes(report: dict) -> list[str]:
    """What the table has no column for: the encoding, failures, the wall time of each size."""
    lines = []
    for result in report["results"]:
        size, enc, lat = result["records"], result.get("encode", {}), result.get("latency", {})
        if result.get("vectors") == RANDOM:
            lines.append(f"{size:,}: {RANDOM}: every record's vector random (seeded by its text), in every "
                         "configuration; agreement and cases passed compare pipelines on those vectors")
        for configuration, made in result.get("ingest", {}).items():
            for member, figures in (made.get("members") or {}).items():
                if figures.get("phases"):
                    phases = ", ".join(f"{k} {v:.1f} s" for k, v in figures["phases"].items())
                    lines.append(f"{size:,}: {configuration}: {member} ({figures.get('index')}): {phases}")
        if "error" in enc:
            lines.append(f"{size:,}: encode failed: {enc['error'].splitlines()[-1]}")
        elif enc:
            first = enc.get("first_encoding") or {}
            lines.append(f"{size:,}: embedding cache {enc['seconds']:.1f} s this run ({enc['encoded']:,} texts "
                         f"encoded); first ever encoding {_cell(first.get('seconds'), '{:.0f}')} s "
                         f"({_cell(first.get('encoded'), '{:,}')} texts)")
        if "error" in lat:
            lines.append(f"{size:,}: latency failed: {lat['error'].splitlines()[-1]}")
        elif lat:
            same = lat.get("embedded_vs_server")
            if same:
                lines.append(f"{size:,}: embedded and server give the same packet on {same['same_packet']:.0%} "
                             f"and the same top-{TOP} on {same[f'same_top{TOP}']:.0%} of the queries")
            lines.append(f"{size:,}: {lat['queries']} queries x {lat['rounds']} rounds; "
                         f"the latency process peaked at {lat['peak_mb']:,.0f} MB")
            found = lat.get(f"recall@{RECALL_AT}")
            if found:
                lines.append(f"{size:,}: standalone: milvus-dense ({found['index']}, ef {found['ef']}) recall@"
                             f"{RECALL_AT} against exact search: " + "; ".join(
                                 f"{found[k]['queries']} {k} queries {found[k]['set']:.4f} ({found[k]['ties']:.4f} "
                                 "counting ties)" for k in ("cases", "records")))
        for configuration, twin in ((STORED, "server"), (STANDALONE_STORED, STANDALONE)):
            stored, made = result.get(configuration, {}), result.get("ingest", {}).get(configuration, {})
            if stored and "error" not in stored and "error" not in made:
                theirs = (lat.get("packets") or {}).get(twin)
                lines.append(f"{size:,}: {configuration}: ingest {made['seconds']:.0f} s in all ({made['timings']}), "
                             f"the ingest process peaked at {made['peak_mb']:,.0f} MB; opening it took "
                             f"{stored['open_s']:.1f} s" + (f"; same packet as the {twin} configuration on "
                             f"{sum(a == b for a, b in zip(stored['packets'], theirs)) / len(theirs):.0%}"
                             if theirs else ""))
        lines.append(f"{size:,}: wall time {result['wall_s'] / 60:.1f} min")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=WORK, help="where the temporary homes, store and server data live")
    ap.add_argument("--stores", type=Path, default=SCALE_WORK, help="the generated stories (scale.py's, shared)")
    ap.add_argument("--timeout", type=float, default=None, help="the Milvus retrievers' timeout option, seconds")
    ap.add_argument("--json", action="store_true", help="print the result as JSON as well")
    ap.add_argument("--retriever", choices=tuple(IN_PROCESS), default="milvus-hybrid",
                    help="the Milvus base retriever (milvus-bm25 needs no encoding: a million records)")
    ap.add_argument("--configurations", default=",".join(DEFAULT_CONFIGURATIONS),
                    help=f"comma-separated, of: {', '.join(CONFIGURATIONS + STORIES_IN_MILVUS)}")
    ap.add_argument("--random-vectors-above", type=int, metavar="N",
                    help="a size past N takes random unit vectors instead of the model's (latency only)")
    ap.add_argument("--again", type=Path, metavar="JSON", help="show a saved run's table instead of measuring")
    # one part of one size, in this process (see one_size)
    ap.add_argument("--part", choices=("encode", "ingest", "latency", "stored-ingest", "stored-latency"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--configuration", choices=CONFIGURATIONS, help=argparse.SUPPRESS)
    ap.add_argument("--uri", help=argparse.SUPPRESS)
    ap.add_argument("--standalone", help=argparse.SUPPRESS)
    ap.add_argument("--random-vectors", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.part:
        if args.random_vectors:
            use_random_vectors()
        print(json.dumps(run_part(args)))
        return 0
    if args.again:
        report = json.loads(args.again.read_text())
    else:
        sizes = [int(s) for s in args.sizes.split(",")]
        chosen = tuple(c.strip() for c in args.configurations.split(",") if c.strip())
        unknown = set(chosen) - set(CONFIGURATIONS + STORIES_IN_MILVUS)
        if unknown or not chosen:
            ap.error(f"--configurations: not one of {', '.join(CONFIGURATIONS + STORIES_IN_MILVUS)}: "
                     f"{', '.join(unknown)}")
        report = {"seed": SEED, "rounds": args.rounds,
                  "results": [one_size(s, args.rounds, args.work, args.stores, args.timeout, args.retriever, chosen,
                                       args.random_vectors_above) for s in sizes]}
        write_json(args.work / "milvus_scale.json", report, indent=1)
    print(table(report))
    print("\n".join(notes(report)))
    if args.json:
        print(json.dumps(report, indent=1))
    return 0


def run_part(args) -> dict:
    if args.part == "encode":
        return encode(args.size, args.stores, args.home)
    if args.part == "ingest":
        return ingest(args.size, args.configuration, args.uri, args.timeout, args.stores, args.home, args.retriever,
                      args.standalone)
    if args.part == "stored-ingest":
        return stored_ingest(args.size, args.retriever, args.uri, args.stores, args.home)
    if args.part == "stored-latency":
        return stored_latency(args.size, args.retriever, args.uri, args.rounds, args.stores, args.home)
    chosen = tuple(c for c in args.configurations.split(",") if c in CONFIGURATIONS)
    return latency(args.size, args.uri, args.timeout, args.rounds, args.stores, args.home, args.retriever, chosen,
                   args.standalone)


if __name__ == "__main__":
    sys.exit(main())
