"""`garden compare` on cases and traces: the same queries under several pipelines, side by
side (the kinds in garden/evaluation/kinds dispatch here, a collection's report too).

For cases, relevance comes from each query's expectations: the `lead` is graded 2,
every `include` and `sequence` id 1; `exclude` ids are counted as forbidden hits.

A trace is a log of distinct questions: events that ask the same thing (story, query,
as_of, hints, session, settings) are folded into the first, and the report says how many
were folded, so running a case suite three more times changes no figure and no p-value.
A trace carries no judgments of its own: a traced query that names its case is judged by
that case's expectations; a free query (typed into `garden query`) is never judged by the
packet it was served, since that would score the serving pipeline against itself. Free
queries are compared by agreement only: overlap of the packets with the baseline's, rank
correlation, and how often each pipeline answered, asked or stayed silent. The report
names the judgments each figure rests on.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from garden._terminal import Progress, counted
from garden.formats.cases import load_case, spec_for
from garden.evaluation.compare import (CompareReport, compare_runs, natural_key, parse_measures,
                      plot_per_query, write_trec_files)
from garden.errors import GardenError
from garden.text import is_number, one_line, shown
from garden.models import Hints
from garden.formats.cases import Expect
from garden.pipelines import make_pipeline, warm_up
from garden.rerank.query import QuerySpec
from garden.formats.stories import load_story, resolve_story_path
from garden.pipelines.traces import TRACE_NAME, read_trace_lines
from garden.evaluation.shapes import ShapeBreakdown, by_shape

STORY_MEASURES = ("AP", "nDCG@10", "R@5", "RR", "P@5")
SHOWN = 20  # disagreeing queries printed in the human view


@dataclass
class Replay:
    qid: str
    label: str
    spec: QuerySpec
    qrels: dict[str, int]
    forbidden: list[str] = field(default_factory=list)
    judged: bool = True  # False: no expectation judges its items: agreement only
    free: bool = False   # a free query (no case): never judged, least of all by its own packet
    question_id: str = ""   # of a trace's question: its content id, the same in any trace
    line: int = 0           # of a trace's question: the line of its first event
    traced: list[str] = field(default_factory=list)  # of a trace's question: pipelines that served it
    case: str | None = None  # of a trace's question: the case whose run asked it
    adjudicated: bool = False  # judged by a person's grades (`garden judge`), not a case
    trace: str = ""            # of a trace's question: the file of its first event
    unanswerable: bool = False  # a case that says nothing in its store answers it: a negative
    number: int = 0            # of a trace's question: its number (see `replays_from_trace`)

    @property
    def graded(self) -> bool:
        """Judged with grades (a lead, an include): it counts in the graded metrics. A
        question judged only by what it forbids counts in the forbidden hits alone."""
        return self.judged and bool(self.qrels)

    def name(self) -> str:
        """How every command names a trace's question: its number in the trace and its
        content id (`garden capture --query` and `garden explore --query` take either)."""
        return f"question {self.number} ({self.question_id})"


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
            if not rels and not q.expect.exclude and not q.expect.unanswerable:
                continue
            spec = spec_for(q, load_story(q.story_path))
            label = loaded.id if q.name is None else f"{loaded.id} -- {q.name}"
            out.append(Replay(f"{loaded.id}#{n}", label, spec, rels, list(q.expect.exclude),
                              unanswerable=q.expect.unanswerable))
    return out


SOURCES = ("query", "case")  # `--source`: free queries only, or case runs only


def question_key(event) -> tuple:
    """What makes two trace events the same question."""
    return (event.story, event.query, event.as_of.isoformat(),
            json.dumps(event.hints.model_dump(mode="json"), sort_keys=True), tuple(event.session),
            json.dumps(event.settings.model_dump(mode="json", exclude_none=True), sort_keys=True))


def question_id(key: tuple) -> str:
    """A question's id from its content, so a judgment made on one trace finds the same
    question in any other trace (a line number would not)."""
    return "q-" + hashlib.sha256(json.dumps(key, ensure_ascii=False).encode("utf-8")).hexdigest()[:12]


VERDICT_OUTCOME = {"answer": "answered", "ask": "asked", "silent": "silent"}


@dataclass
class TraceQuestions:
    replays: list[Replay]
    events: int          # events read that the source filter kept
    folded: int          # of them, repeats of an earlier question
    adjudications: str | None = None            # the judgments file, when one was given
    verdicts: dict[str, str] = field(default_factory=dict)  # replay qid -> a person's question verdict
    filtered: bool = False                      # `trace_source` left some questions out

    def to_json(self) -> dict:
        # `judged` counts the graded questions, the ones the metrics table is over; a question
        # that only forbids items counts apart, in the forbidden hits
        data = {"events": self.events, "distinct": len(self.replays), "folded": self.folded,
                "judged": sum(r.graded for r in self.replays),
                "judged_by_cases": sum(r.graded and not r.adjudicated for r in self.replays),
                "adjudicated": sum(r.graded and r.adjudicated for r in self.replays),
                "forbidden_only": sum(r.judged and not r.graded for r in self.replays),
                "free": sum(r.free for r in self.replays),
                "free_unjudged": sum(r.free and not r.judged for r in self.replays),
                # a case's question that judges no item (a skip or ask control): agreement only
                "case_without_item_judgments": sum(not r.judged and not r.free for r in self.replays)}
        if self.adjudications is not None:
            data["adjudications"] = self.adjudications
            data["question_verdicts"] = len(self.verdicts)
        return data

    def judged_by(self) -> str:
        t = self.to_json()
        cases, person = "each case's expectations", f"a person's grades in {self.adjudications}"
        if t["judged_by_cases"] and t["adjudicated"]:
            return f"{cases} ({t['judged_by_cases']}) and {person} ({t['adjudicated']})"
        return person if t["adjudicated"] else cases


def _trace_days(folder: Path) -> dict[Path, dt.date]:
    days = {}
    for f in folder.iterdir():
        match = TRACE_NAME.fullmatch(f.name)
        if match and f.is_file() and not f.is_symlink():
            try:
                days[f] = dt.date(*map(int, match.groups()))
            except ValueError:  # an impossible date in the name: not a trace of the garden's
                pass
    return days


def trace_files(path: Path, since: dt.date | None = None, until: dt.date | None = None) -> list[Path]:
    """The trace files a source names: the file itself, or the folder's files whose day
    (from the name, as retention reads it) falls in [since, until]; oldest first."""
    if not path.is_dir():
        if since is not None or until is not None:
            raise GardenError(f"{path}: `since` and `until` pick days from a folder of traces; "
                              "a trace file is one day")
        return [path]
    if since is not None and until is not None and since > until:
        raise GardenError(f"`since` {since} is after `until` {until}")
    files = sorted(f for f, day in _trace_days(path).items()
                   if (since is None or day >= since) and (until is None or day <= until))
    if not files:
        raise GardenError(f"{path}: no trace file between {since or 'the first day'} and {until or 'the last'}")
    return files


def replays_from_trace(path: Path, trace_source: str | None = None, adjudicated=None,
                       since: dt.date | None = None, until: dt.date | None = None,
                       expectations: bool = True) -> TraceQuestions:
    """The distinct questions of a trace file or a folder of them (the days in [since,
    until]), each judged by a person's grades when `adjudicated` (a Judgments) holds some
    for it, else by its case when it names one. `trace_source`: "query" keeps free queries
    only, "case" case runs only.

    Each question is numbered by its place among all the distinct questions of the files
    read, whatever `trace_source` keeps, so `garden judge --source query` and `garden
    capture` (or `compare`, or `explore`) give one question one number. Without
    `expectations` a case run's case file is not read (judge and capture need the question,
    not what its case expects)."""
    source = trace_source
    if source is not None and source not in SOURCES:
        raise GardenError(f"`trace_source` must be one of {', '.join(SOURCES)} (got {source!r})")
    files = trace_files(Path(path), since, until)
    out: list[Replay] = []
    seen: dict[tuple, Replay] = {}
    numbers: dict[tuple, int] = {}
    stories: dict[Path, object] = {}
    cases: dict[str, object] = {}
    events = folded = 0
    # damaged lines (a writer killed mid-line) are skipped with a warning; n stays the
    # line's number in its file, so a replay can be found again
    events_read = ((f, n, e) for f in files for n, e in read_trace_lines(f))
    for file, n, event in counted(events_read, Progress("reading the trace", unit="events")):
        key = question_key(event)
        number = numbers.setdefault(key, len(numbers) + 1)
        if (source == "query" and event.case) or (source == "case" and not event.case):
            continue
        events += 1
        if key in seen:
            folded += 1
            if event.pipeline not in seen[key].traced:
                seen[key].traced.append(event.pipeline)
            continue
        story_path = Path(event.story_path) if event.story_path else resolve_story_path(event.story)
        # each story and case file read once, however many of its questions the trace holds
        if story_path not in stories:
            stories[story_path] = load_story(story_path)
        spec = QuerySpec(stories[story_path], event.query, event.as_of, event.budget, event.hints or Hints(),
                         event.include_private, event.settings, list(event.session), str(story_path))
        rels: dict[str, int] = {}
        forbidden: list[str] = []
        if expectations and event.case_path and Path(event.case_path).is_file():
            if event.case_path not in cases:
                cases[event.case_path] = load_case(event.case_path)
            loaded = cases[event.case_path]
            match = next((q for q in loaded.queries if q.spec_fields["query"] == event.query), None)
            if match is not None:
                rels, forbidden = judgments(match.expect), list(match.expect.exclude)
        qid = question_id(key)
        grades = adjudicated.qrels.get(qid) if adjudicated is not None else None
        if grades:  # a person's grades of what was served outrank a case's expectations
            rels = {rid: g for rid, g in grades.items() if g > 0}
            forbidden = sorted(rid for rid, g in grades.items() if g < 0)
        # the content id names the question in every output, a TREC run file included, so a
        # run scores against the qrels `garden judge` writes under the same ids
        seen[key] = Replay(qid, f"{event.case or 'query'}: {event.query}", spec, rels, forbidden,
                           judged=bool(rels or forbidden), free=not event.case, question_id=qid,
                           line=n, traced=[event.pipeline], case=event.case, adjudicated=bool(grades),
                           trace=file.name, number=number)
        out.append(seen[key])
    verdicts = {}
    if adjudicated is not None:
        verdicts = {r.qid: v for r in out if (v := adjudicated.verdict(r.question_id)) is not None}
    return TraceQuestions(out, events, folded, str(adjudicated.path) if adjudicated is not None else None,
                          verdicts, filtered=len(out) < len(numbers))


def find_question(questions: TraceQuestions, which: str, trace: Path) -> Replay:
    """A trace's question by its number (as every command shows it), its qid, or its exact
    text; `questions` are those the trace source kept (`--source`)."""
    replays = questions.replays
    if is_number(which):
        n = int(which)
        found = [r for r in replays if r.number == n]
        if not found:
            last = max((r.number for r in replays), default=0)
            kept = " the source kept (`trace_source`)" if questions.filtered else ""
            raise GardenError(f"{trace}: `query` {n}: no question {n} among the {len(replays)} distinct "
                              f"questions{kept} (numbered 1 to {last} in the trace)")
        return found[0]
    found = [r for r in replays if which in (r.question_id, r.spec.query)]
    if not found:
        raise GardenError(f"{trace}: `query` {shown(which)}: no question with that number, qid or text")
    if len(found) > 1:
        raise GardenError(f"{trace}: `query` {shown(which)}: {len(found)} questions ask it (numbers "
                          f"{', '.join(str(r.number) for r in found)}); name one by number")
    return found[0]


def overlap(a: list[str], b: list[str]) -> float:
    """Jaccard overlap of two packets' items; two empty packets agree."""
    union = set(a) | set(b)
    return len(set(a) & set(b)) / len(union) if union else 1.0


def rank_correlation(a: list[str], b: list[str]) -> float | None:
    """Kendall's tau-b of two packets over the union of their items, an item a packet
    lacks ranked below all it holds (tied there); None when fewer than two items or when
    one side is all ties. Counted pair by pair (a packet holds a handful of items) and
    divided as scipy.stats.kendalltau divides, so the figure is scipy's without importing
    it (a second of a command's start; tests/test_comparing.py holds them equal)."""
    union = sorted(set(a) | set(b))
    if len(union) < 2:
        return None
    ra = [a.index(x) if x in a else len(a) for x in union]
    rb = [b.index(x) if x in b else len(b) for x in union]
    return kendall_tau_b(ra, rb)


def kendall_tau_b(x: list, y: list) -> float | None:
    """Kendall's tau-b (Kendall 1945, "The treatment of ties in ranking problems"):
    (concordant - discordant) / sqrt((pairs - ties in x) (pairs - ties in y)); None when
    either side is all ties."""
    import math

    tot = len(x) * (len(x) - 1) // 2
    con_minus_dis = xtie = ytie = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx, dy = (x[i] > x[j]) - (x[i] < x[j]), (y[i] > y[j]) - (y[i] < y[j])
            xtie += dx == 0
            ytie += dy == 0
            con_minus_dis += dx * dy
    if xtie == tot or ytie == tot:
        return None
    return min(1.0, max(-1.0, con_minus_dis / math.sqrt(tot - xtie) / math.sqrt(tot - ytie)))


def outcome(packet) -> str:
    return packet.outcome   # the packet's own word (garden.models.Packet.outcome)


def agreement(packets: dict[str, dict[str, list[str]]], outcomes: dict[str, dict[str, str]],
              baseline: str) -> dict[str, dict]:
    """Per pipeline: how often it answered, asked or stayed silent, and, beside the
    baseline, the mean packet overlap and rank correlation over the same questions."""
    out = {}
    for p, by_qid in packets.items():
        got = list(outcomes[p].values())
        row = {k: got.count(k) / len(got) for k in ("answered", "asked", "silent")}
        if p != baseline:
            base = packets[baseline]
            row["overlap_with_baseline"] = sum(overlap(by_qid[q], base[q]) for q in by_qid) / len(by_qid)
            taus = [t for q in by_qid if (t := rank_correlation(by_qid[q], base[q])) is not None]
            row["rank_correlation_with_baseline"] = sum(taus) / len(taus) if taus else None
        out[p] = row
    return out


@dataclass
class SourceReport:
    report: CompareReport | None       # graded figures; None when no question has judgments
    side_by_side: list[dict]
    forbidden_hits: dict[str, int]
    agreement: dict[str, dict] = field(default_factory=dict)
    trace: TraceQuestions | None = None
    judged_by: str = "each case's expectations"
    name: str = ""
    baseline: str = ""
    verdicts: dict[str, dict] = field(default_factory=dict)  # per pipeline: outcomes matching a person's verdict
    unanswerable: dict[str, int] = field(default_factory=dict)  # per pipeline: unanswerable questions answered
    negatives: int = 0                                        # questions declared unanswerable
    shapes: ShapeBreakdown | None = None  # the graded figures by the question's shape; None when none is graded

    def to_json(self) -> dict:
        if self.report is not None:
            data = self.report.to_json()
        else:
            data = {"collection": self.name, "queries": 0, "measures": [], "baseline": self.baseline,
                    "pipelines": {p: {} for p in self.agreement}}
        graded = len(self.report.evaluation.qids) if self.report is not None else 0
        data["judgments"] = {
            "graded": f"{graded} questions judged by {self.judged_by}" if graded else "none: no question has judgments",
            "agreement": f"{len(self.side_by_side)} questions, no judgments: packets compared with the baseline's",
        }
        if self.shapes is not None:
            data["by_shape"] = self.shapes.to_json()
        for name, hits in self.forbidden_hits.items():
            data["pipelines"].setdefault(name, {})["forbidden_hits"] = hits
        if self.negatives:
            data["judgments"]["unanswerable"] = (f"{self.negatives} questions declared unanswerable (nothing in the "
                                                 "store answers them): answering one counts against a pipeline")
            for name, answered in self.unanswerable.items():
                data["pipelines"].setdefault(name, {})["unanswerable_answered"] = answered
        if self.agreement:
            data["agreement"] = self.agreement
        if self.verdicts:
            data["question_verdicts"] = self.verdicts
            count = next(iter(self.verdicts.values()))["questions"]
            data["judgments"]["question_verdicts"] = (f"{count} questions with a person's verdict in "
                                                      f"{self.trace.adjudications}")
        if self.trace is not None:
            data["trace"] = self.trace.to_json()
        if self.side_by_side:
            data["per_query"] = self.side_by_side
        return data

    def lines_before(self) -> list[str]:
        """What the figures rest on, said before the table, counted as the table counts."""
        if self.trace is None:
            return []
        t = self.trace.to_json()
        forbidden = (f"; {t['forbidden_only']} judged only by what they forbid (counted in the forbidden hits)"
                     if t["forbidden_only"] else "")
        return [f"{t['distinct']} distinct questions from {t['events']} trace events ({t['folded']} repeats folded): "
                f"{t['judged']} graded by {self.trace.judged_by()}{forbidden}; {t['free_unjudged']} unjudged free "
                f"queries and {t['case_without_item_judgments']} case questions without item judgments compared "
                "by agreement only"]

    def show(self) -> None:
        from rich.table import Table

        from garden._terminal import echo, print_table

        echo(self.lines_before(), prose=True)
        if self.report is not None:
            print_table(self.report.table())
        if self.shapes is not None:
            print_table(self.shapes.table(title=f"by shape: {len(self.report.evaluation.qids)} graded questions, "
                                                f"baseline {self.baseline}"))
        if self.report is None:
            echo(["no question has judgments: no graded metric (a free query is never scored against the packet "
                  "it was served)"], prose=True)
        if self.agreement:
            # "no judgments" only when no question is graded: the agreement is shown either way
            table = Table(title=f"agreement with {self.baseline} over {len(self.side_by_side)} questions"
                                + (" (no judgments)" if self.report is None else ""))
            for col in ("pipeline", "answered", "asked", "silent", "overlap", "rank correlation"):
                table.add_column(col, justify="left" if col == "pipeline" else "right")
            for p, row in self.agreement.items():
                tau = row.get("rank_correlation_with_baseline")
                table.add_row(p, *(f"{row[k]:.3f}" for k in ("answered", "asked", "silent")),
                              f"{row['overlap_with_baseline']:.3f}" if p != self.baseline else "baseline",
                              f"{tau:.3f}" if tau is not None else "-")
            print_table(table)
        lines = []
        if self.negatives:
            lines.append(f"of {self.negatives} questions nothing in the store answers (unanswerable: true), "
                         "answered: " + ", ".join(f"{p} {n}" for p, n in self.unanswerable.items()))
        if self.verdicts:
            lines.append("question verdicts (a person's answer / ask / stay silent) matched: " + ", ".join(
                f"{p} {v['matched']}/{v['questions']}" for p, v in self.verdicts.items()))
        disagreements = [row for row in self.side_by_side if row["disagree"]]
        for row in disagreements[:SHOWN]:
            named = f"question {row['question']}, " if "question" in row else ""
            lines.append(one_line(f"disagree: {named}{row['query']}"))
            lines += [one_line(f"    {p}: {', '.join(ids) or '(empty)'}") for p, ids in row["top"].items()]
        if len(disagreements) > SHOWN:
            lines.append(f"... and {len(disagreements) - SHOWN} more disagreements (all of them in --json)")
        lines.append(f"pipelines disagree on the first item for {len(disagreements)} of "
                     f"{len(self.side_by_side)} questions")
        if self.forbidden_hits:
            lines.append("forbidden hits: " + ", ".join(f"{p} {n}" for p, n in self.forbidden_hits.items()))
        if self.report is not None:
            first = self.report.measures[0]
            best = max(self.report.evaluation.aggregates.items(), key=lambda kv: kv[1][first])
            lines.append(f"{len(self.report.evaluation.qids)} graded questions, "
                         f"{len(self.report.evaluation.aggregates)} pipelines; best {first}: {best[0]} "
                         f"{best[1][first]:.4f}")
        echo(lines, prose=True)


SIDE_BY_SIDE = 3  # top items shown per pipeline and query


def side_by_side(report: CompareReport | None, tops: dict[str, dict[str, list[str]]],
                 labels: dict[str, str], numbers: dict[str, int] | None = None) -> list[dict]:
    """Per question: each pipeline's top items, its value of the first metric where the
    question is judged, and whether the pipelines disagree on what comes first. A trace's
    questions carry their `numbers` and keep that order."""
    rows = []
    order = sorted(labels, key=numbers.__getitem__) if numbers else sorted(labels, key=natural_key)
    for qid in order:
        top = {p: tops[p].get(qid, [])[:SIDE_BY_SIDE] for p in tops}
        row = {"qid": qid, "query": labels[qid], "top": top,
               "disagree": len({tuple(ids[:1]) for ids in top.values()}) > 1}
        if numbers:
            row["question"] = numbers[qid]
        if report is not None and qid in report.evaluation.qids:
            first = report.measures[0]
            row[first] = {p: report.evaluation.per_query[p][first][qid] for p in report.evaluation.per_query}
        rows.append(row)
    return rows


def compare_replays(replays: list[Replay], pipelines: list[str], baseline: str | None, name: str,
                    measures, trec_dir=None, plot=None, trace: TraceQuestions | None = None) -> SourceReport:
    if not replays:
        raise GardenError(f"{name}: no question to compare")
    baseline = baseline if baseline is not None else pipelines[0]
    runs: dict[str, dict] = {}
    speed: dict[str, float] = {}
    packets: dict[str, dict[str, list[str]]] = {}
    outcomes: dict[str, dict[str, str]] = {}
    forbidden: dict[str, int] = {}
    for p in pipelines:
        pipeline = make_pipeline(p)
        with Progress(f"compare: {p}", total=len(replays), unit="questions") as bar:
            bar.now("loading the pipeline")
            # untimed: a model's one-time loading is not a query's cost (and when every question's
            # vector is kept, no model is loaded at all)
            asked = [text for r in replays for text in (r.spec.query, *r.spec.session)]
            warm_up(pipeline, replays[0].spec, asked)
            bar.now("")
            start = time.perf_counter()
            served = {}
            for r in replays:
                served[r.qid] = pipeline.run(r.spec).packet
                bar.advance()
            elapsed = time.perf_counter() - start
        speed[p] = len(replays) / elapsed if elapsed > 0 else None  # too fast to time: no figure
        ids = {qid: packet.ids() for qid, packet in served.items()}
        packets[p] = ids
        outcomes[p] = {qid: outcome(packet) for qid, packet in served.items()}
        # packet order is the ranking: score by position so ties cannot reorder it
        runs[p] = {qid: [(rid, float(len(items) - i)) for i, rid in enumerate(items)] for qid, items in ids.items()}
        forbidden[p] = sum(len(set(ids[r.qid]) & set(r.forbidden)) for r in replays if r.judged)
    qrels = {r.qid: r.qrels for r in replays if r.graded}
    report = None
    if qrels:
        judged_runs = {p: {q: run[q] for q in qrels} for p, run in runs.items()}
        report = compare_runs(qrels, judged_runs, baseline, measures, speed, name)
        report.queries = {r.qid: r.spec.query for r in replays}
    numbers = {r.qid: r.number for r in replays} if trace is not None else None
    side = side_by_side(report, packets, {r.qid: r.label for r in replays}, numbers)
    if trec_dir is not None:
        write_trec_files(trec_dir, runs, qrels)
    if plot is not None and report is not None:
        plot_per_query(plot, report.evaluation.per_query, report.baseline, report.measures[0])
    negatives = [r.qid for r in replays if r.unanswerable]
    # nothing answers these: an answer is wrong, silence or a question back is right
    unanswerable = {p: sum(outcomes[p][q] == "answered" for q in negatives) for p in pipelines} if negatives else {}
    verdicts = {}
    if trace is not None and trace.verdicts:
        verdicts = {p: {"matched": sum(outcomes[p][q] == VERDICT_OUTCOME[v] for q, v in trace.verdicts.items()),
                        "questions": len(trace.verdicts)} for p in pipelines}
    return SourceReport(report, side, forbidden, agreement(packets, outcomes, baseline), trace,
                        judged_by=trace.judged_by() if trace is not None else "each case's expectations",
                        name=name, baseline=baseline, verdicts=verdicts, unanswerable=unanswerable,
                        negatives=len(negatives), shapes=by_shape(report, report.queries) if report else None)


def story_measures(metrics: Sequence[str] | None) -> list[str]:
    """The measures cases and traces are judged by: `metrics`, else STORY_MEASURES; checked."""
    measures = list(metrics) if metrics else list(STORY_MEASURES)
    parse_measures(measures)
    return measures
