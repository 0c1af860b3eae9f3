"""`garden compare`: the same queries under several pipelines, side by side.

The source is a collection folder (TREC or BEIR layout), a case file or folder, or a trace
file. For cases, relevance comes from each query's expectations: the `lead` is graded 2,
every `include` and `sequence` id 1; `exclude` ids are counted as forbidden hits. A trace
carries no judgments of its own: a traced query that names its case is judged by that
case, any other by the packet it was served (agreement with what the user saw).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from garden.formats.cases import load_case, spec_for
from garden.evaluation.compare import (CompareReport, compare_collection, compare_runs, natural_key, parse_measures,
                      plot_per_query, write_trec_run)
from garden.errors import GardenError
from garden.models import Expect, Hints
from garden.pipelines import check_pipeline, make_pipeline
from garden.rerank.query import QuerySpec
from garden.formats.stories import load_story, resolve_story_path
from garden.derived.traces import read_trace_lines

STORY_MEASURES = ("AP", "nDCG@10", "R@5", "RR", "P@5")
SHOWN = 20  # disagreeing queries printed in the human view


@dataclass
class Replay:
    qid: str
    label: str
    spec: QuerySpec
    qrels: dict[str, int]
    forbidden: list[str] = field(default_factory=list)


def judgments(expect: Expect) -> dict[str, int]:
    rels = {rid: 1 for rid in [*expect.include, *expect.sequence]}
    if expect.lead:
        rels[expect.lead] = 2
    return rels


def replays_from_cases(paths: list[Path]) -> list[Replay]:
    out = []
    for path in paths:
        loaded = load_case(path)
        for n, q in enumerate(loaded.queries):
            if q.expect.build_error or q.expect.decision in ("skip", "ask"):
                continue
            rels = judgments(q.expect)
            if not rels and not q.expect.exclude:
                continue
            spec = spec_for(q, load_story(q.story_path))
            label = loaded.id if q.name is None else f"{loaded.id} -- {q.name}"
            out.append(Replay(f"{loaded.id}#{n}", label, spec, rels, list(q.expect.exclude)))
    return out


def replays_from_trace(path: Path) -> list[Replay]:
    out = []
    # damaged lines (a writer killed mid-line) are skipped with a warning; n stays the
    # line's number in the file, so a replay can be found again
    for n, event in read_trace_lines(path):
        story_path = Path(event.story_path) if event.story_path else resolve_story_path(event.story)
        spec = QuerySpec(load_story(story_path), event.query, event.as_of, event.budget, event.hints or Hints(),
                         event.include_private, event.settings, list(event.session), str(story_path))
        rels = {item.id: 1 for item in event.packet.items}
        forbidden: list[str] = []
        if event.case_path and Path(event.case_path).is_file():
            loaded = load_case(event.case_path)
            match = next((q for q in loaded.queries if q.spec_fields["query"] == event.query), None)
            if match is not None:
                rels, forbidden = judgments(match.expect), list(match.expect.exclude)
        if rels or forbidden:
            out.append(Replay(f"line{n}", f"{event.case or 'query'}: {event.query}", spec, rels, forbidden))
    return out


@dataclass
class SourceReport:
    report: CompareReport
    side_by_side: list[dict]
    forbidden_hits: dict[str, int]

    def to_json(self) -> dict:
        data = self.report.to_json()
        for name, hits in self.forbidden_hits.items():
            data["pipelines"].setdefault(name, {})["forbidden_hits"] = hits
        if self.side_by_side:
            data["per_query"] = self.side_by_side
        return data

    def show(self) -> None:
        from rich.console import Console
        from rich.markup import escape

        console = Console(width=160)
        console.print(self.report.table())
        disagreements = [row for row in self.side_by_side if row["disagree"]]
        for row in disagreements[:SHOWN]:
            tops = "  |  ".join(f"{p}: {', '.join(ids) or '(empty)'}" for p, ids in row["top"].items())
            console.print(f"[yellow]disagree[/yellow] {escape(row['query'])}\n    {tops}")
        if len(disagreements) > SHOWN:
            console.print(f"... and {len(disagreements) - SHOWN} more disagreements (all of them in --json)")
        console.print(f"pipelines disagree on the first item for {len(disagreements)} of "
                      f"{len(self.side_by_side)} queries")
        if self.forbidden_hits:
            console.print("forbidden hits: " + ", ".join(f"{p} {n}" for p, n in self.forbidden_hits.items()))
        first = self.report.measures[0]
        best = max(self.report.evaluation.aggregates.items(), key=lambda kv: kv[1][first])
        console.print(f"{len(self.report.evaluation.qids)} queries, {len(self.report.evaluation.aggregates)} "
                      f"pipelines; best {first}: {best[0]} {best[1][first]:.4f}")


SIDE_BY_SIDE = 3  # top items shown per pipeline and query


def side_by_side(report: CompareReport, tops: dict[str, dict[str, list[str]]], labels: dict[str, str]) -> list[dict]:
    """Per query: each pipeline's top items, its value of the first metric, and whether
    the pipelines disagree on what comes first."""
    first = report.measures[0]
    per_query = report.evaluation.per_query
    rows = []
    for qid in sorted(labels, key=natural_key):
        top = {p: tops[p].get(qid, [])[:SIDE_BY_SIDE] for p in tops}
        row = {"qid": qid, "query": labels[qid], "top": top,
               "disagree": len({tuple(ids[:1]) for ids in top.values()}) > 1}
        if qid in report.evaluation.qids:
            row[first] = {p: per_query[p][first][qid] for p in per_query}
        rows.append(row)
    return rows


def compare_replays(replays: list[Replay], pipelines: list[str], baseline: str | None, name: str,
                    measures, trec_dir=None, plot=None) -> SourceReport:
    if not replays:
        raise GardenError(f"{name}: no query with judgments to compare")
    runs: dict[str, dict] = {}
    speed: dict[str, float] = {}
    packets: dict[str, dict[str, list[str]]] = {}
    forbidden: dict[str, int] = {}
    for p in pipelines:
        pipeline = make_pipeline(p)
        start = time.perf_counter()
        ids = {r.qid: pipeline.run(r.spec).packet.ids() for r in replays}
        elapsed = time.perf_counter() - start
        speed[p] = len(replays) / elapsed if elapsed > 0 else None  # too fast to time: no figure
        packets[p] = ids
        # packet order is the ranking: score by position so ties cannot reorder it
        runs[p] = {qid: [(rid, float(len(items) - i)) for i, rid in enumerate(items)] for qid, items in ids.items()}
        forbidden[p] = sum(len(set(ids[r.qid]) & set(r.forbidden)) for r in replays)
    qrels = {r.qid: r.qrels for r in replays if r.qrels}
    judged_runs = {p: {q: run[q] for q in qrels} for p, run in runs.items()}
    report = compare_runs(qrels, judged_runs, baseline, measures, speed, name)
    side = side_by_side(report, packets, {r.qid: r.label for r in replays})
    if trec_dir is not None:
        for p, run in runs.items():
            write_trec_run(Path(trec_dir) / f"{p}.run", {q: v for q, v in run.items() if v}, p)
    if plot is not None:
        plot_per_query(plot, report.evaluation.per_query, report.baseline, report.measures[0])
    return SourceReport(report, side, forbidden)


def is_collection(path: Path) -> bool:
    return path.is_dir() and (any((path / n).exists() for n in ("qrels", "corpus.jsonl", "corpus")))


def compare_source(source: str, pipelines: list[str], baseline: str | None = None, trec_dir: str | None = None,
                   plot: str | None = None, metrics: str | None = None):
    if not pipelines:
        raise GardenError("--pipelines names no pipeline")
    from garden.evaluation.locomo import FUSION_NAME, compare_locomo, is_locomo

    for p in pipelines:
        if p != FUSION_NAME:  # a LoCoMo reference, checked below
            check_pipeline(p)
    if baseline is not None and baseline not in pipelines:
        raise GardenError(f"baseline {baseline!r} is not among the pipelines: {', '.join(pipelines)}")
    path = Path(source)
    if not path.exists():
        raise GardenError(f"{source}: no such collection folder, case file or trace file")
    if is_locomo(path):
        if metrics or plot or trec_dir:
            raise GardenError(f"{source}: a LoCoMo comparison reports its fixed measures "
                              "(--metrics, --plot and --trec-dir apply to collections, cases and traces)")
        return compare_locomo(path, pipelines, baseline)
    if FUSION_NAME in pipelines:
        raise GardenError(f"pipeline {FUSION_NAME!r} is a reference for LoCoMo only: {source} is not LoCoMo")
    if is_collection(path):
        measures = [m.strip() for m in metrics.split(",")] if metrics else None
        kwargs = {"measures": measures} if measures else {}
        report = compare_collection(path, pipelines, baseline, trec_dir=trec_dir, plot=plot, **kwargs)
        tops = {p: {q: [doc for doc, _ in ranking[:SIDE_BY_SIDE]] for q, ranking in run.items()}
                for p, run in report.rankings.items()}
        return SourceReport(report, side_by_side(report, tops, report.queries), {})
    measures = [m.strip() for m in metrics.split(",")] if metrics else list(STORY_MEASURES)
    parse_measures(measures)
    if path.suffix == ".jsonl":
        replays = replays_from_trace(path)
    else:
        files = sorted(path.rglob("*.yaml")) if path.is_dir() else [path]
        replays = replays_from_cases(files)
    return compare_replays(replays, pipelines, baseline, str(path), measures, trec_dir, plot)
