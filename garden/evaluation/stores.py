"""The engine of `garden compare` on a set of stores that each ask their own questions:
LoCoMo's conversations (garden/evaluation/locomo.py), LongMemEval's haystacks
(garden/evaluation/longmemeval.py), any imported store set.

A store is a `Conversation`: a story and the questions asked of it. A question is judged
by its evidence turns (source records); one with none is a negative, judged only by the
decision and the packet, since no ranking measure is defined for a question nothing
answers.

One rule turns every pipeline's ranking into a ranking of turns (`turn_ranking`): a turn
stands for itself; a record citing turns (an observation, a session summary) stands, at
its own position, for the turns it cites that are not ranked yet, in the order of the
pipeline's own scores for them (a turn it did not score counts 0), ties in story order;
anything else is left out. Session level: each pipeline's own ranking of sittings
(garden/rerank/sittings.py): a structured pipeline's sittings stage, and for a bare
retriever (or a structured pipeline without that stage) one rule for all, a sitting ranked
by the best score of a record standing in it.

Bare retrievers rank the whole story as one batch; a structured pipeline runs its stages
per question with `candidates` raised to the depth and ranks by the reranker's score
(`Ranked.by_relevance`). The packet a user would get is the pipeline's own run at the
default budget (garden/evaluation/packets.py).

Stores are taken one at a time, every pipeline over a store before the next store is read,
so a comparison over a stream of stores (LongMemEval's M file) holds one store at a time.
"""
from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from garden.formats.layout import CASES_FOLDER, STORY_FOLDER
from garden.evaluation.compare import (ALPHA, PERMUTATIONS, CompareReport, compare_runs, parse_measures,
                                      summary_block)
from garden.evaluation.packets import PacketRow, decision_report, packet_row, packet_tables
from garden.evaluation.shapes import ShapeBreakdown, by_shape, gold_gathering
from garden.models import DEFAULT_BUDGET, Sitting, Story
from garden.rerank.stages import Settings
from garden.rerank.premise import WARNING as PREMISE_WARNING

TURN_MEASURES = ("Success@1", "Success@5", "Success@10", "R@5", "R@10", "nDCG@10")
SHAPE_MEASURES = ("Success@5", "R@10", "nDCG@10")   # printed by shape; the JSON carries every measure
ALL_AT = 5            # the share of questions with every evidence turn in the top 5
DEPTH = 100           # records a pipeline ranks per question; @10 is the deepest garden measure
TURN_KIND = "source"


@dataclass
class Question:
    qid: str                 # <story>/<case id>
    text: str
    category: str            # "4 single-hop", "temporal-reasoning"
    evidence: list[str]      # empty for a negative: nothing in this store answers it
    as_of: object
    negative: str | None = None   # how a negative was built (see negatives.py); None: the store's own
    source: str | None = None     # a negative's original question, <story>/<case id>


@dataclass
class Conversation:
    story: Story
    questions: list[Question]

    @property
    def turns(self) -> list[str]:
        return [r.id for r in self.story.records if r.kind == TURN_KIND]

    def sessions(self) -> dict[str, str]:
        """Turn id -> its session: the run of turns in story order sharing a date and title."""
        out, key, n = {}, None, 0
        for r in self.story.records:
            if r.kind != TURN_KIND:
                continue
            if (r.at, r.title) != key:
                key, n = (r.at, r.title), n + 1
            out[r.id] = f"s{n}"
        return out


def questions_of(story: Story, cases: Sequence[dict], category: Callable[[str | None], str]) -> list[Question]:
    """The judged questions of a store's cases: a case naming an evidence turn, and a case
    that declares itself unanswerable (`expect: {unanswerable: true}`), which is a negative.
    `category` reads a case's category field."""
    turns = {r.id for r in story.records if r.kind == TURN_KIND}
    out = []
    for case in cases:
        expect = case.get("expect") or {}
        evidence = [rid for rid in expect.get("include", []) if rid in turns]
        declared = expect.get("unanswerable") is True
        if evidence or declared:
            out.append(Question(f"{story.name}/{case['id']}", case["query"], category(case.get("category")),
                                [] if declared else evidence, dt.date.fromisoformat(str(case["as_of"])),
                                negative="declared" if declared else None))
    return out


def iter_imported(root: Path, pattern: str, category: Callable[[str | None], str]) -> Iterator[Conversation]:
    """The stores of an import's output, one at a time: each story `fixtures/<pattern>`
    with the cases of `cases/<its name>/`."""
    from garden.formats.stories import load_story
    from garden.formats.yaml_reader import read_yaml

    for file in sorted((root / STORY_FOLDER).glob(pattern)):
        story = load_story(file)
        cases = [read_yaml(f) for f in sorted((root / CASES_FOLDER / file.stem).glob("*.yaml"))]
        yield Conversation(story, questions_of(story, [c for c in cases if isinstance(c, dict)], category))


def turn_ranking(story: Story, ranking: Sequence[tuple[str, float]], depth: int = DEPTH) -> list[str]:
    """The turns a ranking of records stands for, best first (see the module docstring)."""
    scores = dict(ranking)
    order = story.order
    out: list[str] = []
    placed: set[str] = set()
    for rid, _ in ranking:
        record = story.by_id.get(rid)
        if record is None:
            continue
        if record.kind == TURN_KIND:
            cited = [rid]
        else:
            cited = sorted((s for s in record.sources if s in story.by_id and story.by_id[s].kind == TURN_KIND),
                           key=lambda s: (-scores.get(s, 0.0), order[s]))
        for tid in cited:
            if tid not in placed:
                placed.add(tid)
                out.append(tid)
        if len(out) >= depth:
            break
    return out[:depth]


def as_run(ranked: Sequence[str]) -> list[tuple[str, float]]:
    """Scores that keep the order (ir-measures sorts by score)."""
    return [(doc, float(len(ranked) - i)) for i, doc in enumerate(ranked)]


def sessions_run(turns: Sequence[str], session_of: Mapping[str, str]) -> list[str]:
    out: list[str] = []
    for t in turns:
        s = session_of[t]
        if s not in out:
            out.append(s)
    return out


def sitting_turns(story: Story, sittings: Sequence[Sitting]) -> list[tuple[str, ...]]:
    """The records of each sitting ranked, in the ranking's order."""
    from garden.rerank.sittings import sitting_records

    members = sitting_records(story)
    return [members[s.sitting] for s in sittings]


def sittings_run(sittings: Sequence[tuple[str, ...]], session_of: Mapping[str, str]) -> list[str]:
    """A ranking of sittings (each its records) as the judged sessions, best first: a
    sitting is the session its turns sit in."""
    return sessions_run([next(rid for rid in held if rid in session_of) for held in sittings
                         if any(rid in session_of for rid in held)], session_of)


# --- running the pipelines -------------------------------------------------------------


@dataclass
class Reference:
    """A ranking of turns that is not a pipeline (a benchmark's published baseline): it
    ranks, and serves no packet."""

    name: str
    rank: Callable[["Conversation", int, Sequence[Question]], list[list[tuple[str, float]]]]


def rank_questions(pipeline, conv: Conversation, depth: int, questions: Sequence[Question] | None = None,
                   settings: Settings | None = None) -> list[list[tuple[str, float]]]:
    """Each question's ranking of records, best first, to `depth`."""
    return [records for records, _ in rank_both(pipeline, conv, depth, questions, settings, with_sittings=False)]


def rank_both(pipeline, conv: Conversation, depth: int, questions: Sequence[Question] | None = None,
              settings: Settings | None = None, with_sittings: bool = True,
              ) -> list[tuple[list[tuple[str, float]], list[Sitting]]]:
    """Each question's ranking of records, best first, to `depth`, and its ranking of
    sittings: a structured pipeline's sittings stage, or the bare rule on its ranking
    (none made when not `with_sittings`)."""
    from garden.pipelines.structured import StructuredPipeline
    from garden.rerank.query import QuerySpec
    from garden.rerank.sittings import bare_sittings
    from garden.retrievers import as_retriever

    questions = conv.questions if questions is None else questions
    story = conv.story
    if isinstance(pipeline, StructuredPipeline):
        settings = (settings or Settings()).merged(Settings(candidates=depth))
        out = []
        for q in questions:
            ranked = pipeline.ranking(QuerySpec(story, q.text, q.as_of, settings=settings), depth)
            records = ranked.by_relevance(depth)
            out.append((records, (ranked.sittings or bare_sittings(story, records, pipeline.name))
                        if with_sittings else []))
        return out
    if isinstance(pipeline, Reference):
        rankings = pipeline.rank(conv, depth, questions)
    else:
        rankings = as_retriever(pipeline.indexes.retriever(story, pipeline.name)).top_many(
            [q.text for q in questions], depth)
    return [(records, bare_sittings(story, records, pipeline.name) if with_sittings else []) for records in rankings]


def prepare(pipeline, story: Story) -> None:
    """Build what the pipeline needs for `story`, so that no index build is timed."""
    from garden.pipelines.ranking import prepare as prepare_structured
    from garden.pipelines.structured import StructuredPipeline

    if isinstance(pipeline, Reference):
        return
    if isinstance(pipeline, StructuredPipeline):
        prepare_structured(pipeline, story)
    else:
        from garden.retrievers import load_models

        load_models(pipeline.indexes.retriever(story, pipeline.name))


def packets(pipeline, conv: Conversation, questions: Sequence[Question], budget: int,
            rankings: Sequence[Sequence[tuple[str, float]]]) -> list[PacketRow]:
    """The packet each question gets from the pipeline's own run, as a row of the report."""
    from garden.analyzer import analyze
    from garden.rerank.decide import gate_score
    from garden.rerank.query import QuerySpec

    out = []
    session_of = conv.sessions()
    for q, ranking in zip(questions, rankings):
        outcome = pipeline.run(QuerySpec(conv.story, q.text, q.as_of, budget=budget))
        packet = outcome.packet
        flagged = any(w.startswith(PREMISE_WARNING) for w in packet.warnings)
        out.append(packet_row(q, packet, conv.story, gate_score(outcome.trace), [s for _, s in ranking],
                              len(analyze(q.text)), flagged,
                              gold=gold_gathering(session_of[t] for t in q.evidence)))
    return out


@dataclass
class StoreRuns:
    """What every pipeline did over a set of stores."""

    turn: dict[str, dict]                 # pipeline -> qid -> run of turns
    session: dict[str, dict]              # pipeline -> qid -> run of sessions
    turn_qrels: dict[str, dict]
    session_qrels: dict[str, dict]
    questions: list[Question]             # the judged ones (with evidence), in the order asked
    asked: dict[str, list[Question]]      # story -> every question asked of it, negatives too
    rows: dict[str, list[PacketRow]]
    ms: dict[str, float]                  # pipeline -> milliseconds per question asked


# (pipeline name, store, question, turns ranked best first, sittings ranked best first, each
# its records): for a caller's own measures
OnTurns = Callable[[str, Conversation, Question, list[str], list[tuple[str, ...]]], None]


def run_stores(stores: Iterable[tuple[Conversation, Sequence[Question]]], pipelines: Mapping[str, object],
               depth: int = DEPTH, budget: int = DEFAULT_BUDGET, with_packets: bool = True,
               on_turns: OnTurns | None = None) -> StoreRuns:
    """Every pipeline (name -> pipeline or Reference) over each (store, questions asked of
    it), one store at a time. Index builds are done before the clock starts."""
    from garden._terminal import Progress

    runs = StoreRuns({p: {} for p in pipelines}, {p: {} for p in pipelines}, {}, {}, [], {}, {}, {})
    elapsed = dict.fromkeys(pipelines, 0.0)
    with Progress("compare", unit="stores done") as bar:
        for conv, mine in stores:
            _run_store(runs, elapsed, conv, list(mine), pipelines, depth, budget, with_packets, on_turns, bar)
            bar.advance()
    total = sum(len(v) for v in runs.asked.values())
    runs.ms = {name: 1e3 * e / total if total else 0.0 for name, e in elapsed.items()}
    return runs


def _run_store(runs: StoreRuns, elapsed: dict[str, float], conv: Conversation, mine: list[Question],
               pipelines: Mapping[str, object], depth: int, budget: int, with_packets: bool,
               on_turns: OnTurns | None, bar) -> None:
    """One store's questions under every pipeline, into `runs` (see `run_stores`)."""
    runs.asked[conv.story.name] = mine
    session_of = conv.sessions()
    for q in mine:
        if q.evidence:
            runs.questions.append(q)
            runs.turn_qrels[q.qid] = {t: 1 for t in q.evidence}
            runs.session_qrels[q.qid] = {session_of[t]: 1 for t in q.evidence}
    for name, pipeline in pipelines.items():
        bar.now(f"{conv.story.name} under {name}")
        prepare(pipeline, conv.story)
        start = time.perf_counter()
        both = rank_both(pipeline, conv, depth, mine)
        elapsed[name] += time.perf_counter() - start
        rankings = [records for records, _ in both]
        for q, (ranking, sittings) in zip(mine, both):
            if not q.evidence:
                continue
            turns = turn_ranking(conv.story, ranking, depth)
            held = sitting_turns(conv.story, sittings)
            runs.turn[name][q.qid] = as_run(turns)
            runs.session[name][q.qid] = as_run(sittings_run(held, session_of))
            if on_turns is not None:
                on_turns(name, conv, q, turns, held)
        if with_packets and not isinstance(pipeline, Reference):
            runs.rows.setdefault(name, []).extend(packets(pipeline, conv, mine, budget, rankings))


def all_evidence(report: CompareReport) -> dict[str, float]:
    """Share of questions whose every evidence turn is in the top ALL_AT: R@5 = 1."""
    ev = report.evaluation
    return {p: float(np.mean(ev.values(p, f"R@{ALL_AT}") >= 1 - 1e-9)) for p in ev.per_query}


@dataclass
class Judged:
    turn: CompareReport
    session: CompareReport
    by_category: dict[str, CompareReport]
    all_at: dict[str, float]
    all_at_by_category: dict[str, dict[str, float]]
    by_shape: ShapeBreakdown
    session_by_shape: ShapeBreakdown


def store_measures(metrics: Sequence[str] | None = None) -> tuple[str, ...]:
    """The measures a store set is judged by: TURN_MEASURES, which its tables read, and after
    them any others `metrics` names (ir-measures names, checked before a store is read)."""
    added = tuple(m for m in dict.fromkeys(metrics or ()) if m not in TURN_MEASURES)
    if added:
        parse_measures(list(added))
    return TURN_MEASURES + added


def write_store_runs(runs: StoreRuns, trec_dir: str | Path) -> None:
    """The turn rankings as `<pipeline>.run` beside `qrels` (the evidence turns), and the
    session rankings as `<pipeline>.session.run` beside `session.qrels`: TREC files that
    trec_eval or ranx score as the garden's turn and session levels do."""
    from garden.evaluation.runs import write_trec_files

    write_trec_files(trec_dir, runs.turn, runs.turn_qrels)
    write_trec_files(trec_dir, runs.session, runs.session_qrels, level="session")


def judge_runs(runs: StoreRuns, baseline: str, name: str, permutations: int = PERMUTATIONS,
               alpha: float = ALPHA, measures: Sequence[str] = TURN_MEASURES) -> Judged:
    """The garden's measures (ir-measures; `measures` starts with TURN_MEASURES) at turn and
    session level, by category, and by shape at both levels (garden/evaluation/shapes.py),
    each pipeline tested against the baseline (paired randomization test, Holm's correction)."""
    speed = {p: 1e3 / v for p, v in runs.ms.items() if v > 0}
    turn = compare_runs(runs.turn_qrels, runs.turn, baseline, measures, speed, name=name,
                        permutations=permutations, alpha=alpha)
    session = compare_runs(runs.session_qrels, runs.session, baseline, measures, name=name,
                           permutations=permutations, alpha=alpha)
    by_category, all_by_category = {}, {}
    for cat in sorted({q.category for q in runs.questions}):
        qrels = {q.qid: runs.turn_qrels[q.qid] for q in runs.questions if q.category == cat}
        by_category[cat] = compare_runs(qrels, runs.turn, baseline, measures, name=f"{name} {cat}",
                                        permutations=permutations, alpha=alpha)
        all_by_category[cat] = all_evidence(by_category[cat])
    texts = {q.qid: q.text for q in runs.questions}
    # the gold class by the same sessions the session-level judgments name
    gold = [q.qid for q in runs.questions if gold_gathering(runs.session_qrels[q.qid])]
    shapes = by_shape(turn, texts, gold)
    shapes.extra = {row: {f"all_evidence@{ALL_AT}": all_evidence(rep)} for row, rep in shapes.reports.items()}
    return Judged(turn, session, by_category, all_evidence(turn), all_by_category, shapes,
                  by_shape(session, texts, gold))


@dataclass
class StoresReport:
    """A comparison over a store set: the garden's measures, the packet, and whatever
    measures of its own the benchmark adds (`extra`: JSON under its own key, and tables)."""

    source: str
    baseline: str
    judgments: str                                 # what the figures rest on
    turn: CompareReport
    session: CompareReport
    by_category: dict[str, CompareReport]
    all_at: dict[str, float]                       # pipeline -> share with every evidence turn in the top ALL_AT
    all_at_by_category: dict[str, dict[str, float]]
    packets: object | None                         # DecisionReport: what the user gets
    ms_per_query: dict[str, float]
    conversations: int
    questions: int
    negatives: dict | None = None                  # how the negatives were built, and how many
    plot: str | None = None                        # the risk-coverage PNG, when written
    extra: dict = field(default_factory=dict)      # key -> JSON of a benchmark's own measures
    extra_tables: list = field(default_factory=list, repr=False)
    stores_word: str = "conversations"
    # what was judged, for side-by-side views (not in the JSON): pipeline -> qid -> turns, best first
    rankings: dict[str, dict[str, list[str]]] = field(default_factory=dict, repr=False)
    asked: dict[str, Question] = field(default_factory=dict, repr=False)
    by_shape: ShapeBreakdown | None = None         # turn level by shape, the gold row beside the rule's
    session_by_shape: ShapeBreakdown | None = None
    measures: tuple[str, ...] = TURN_MEASURES      # what the levels are judged by (store_measures)

    def to_json(self) -> dict:
        return {
            "source": self.source,
            "judgments": self.judgments,
            self.stores_word: self.conversations,
            "questions": self.questions,
            "baseline": self.baseline,
            "measures": list(self.measures),
            "turn": {**summary_block(self.turn), f"all_evidence@{ALL_AT}": self.all_at},
            "session": summary_block(self.session),
            "by_category": {cat: {**summary_block(rep), f"all_evidence@{ALL_AT}": self.all_at_by_category[cat]}
                            for cat, rep in self.by_category.items()},
            "by_shape": self.shapes_json(),
            **self.extra,
            "negatives": self.negatives,
            "packet": self.packets.to_json() if self.packets else None,
            "risk_coverage_plot": self.plot,
            "ms_per_query": self.ms_per_query,
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    def shapes_json(self) -> dict | None:
        if self.by_shape is None:
            return None
        data = self.by_shape.to_json("turn")
        if self.session_by_shape is not None:
            data["session"] = self.session_by_shape.rows_json()
        return data

    def show(self) -> None:
        from garden._terminal import print_table

        for table in self.tables():
            print_table(table)

    def tables(self) -> list:
        from rich.table import Table

        out = []
        for title, report in [("turn level", self.turn), ("session level", self.session)]:
            table = report.table()
            table.title = f"{self.source}, {title}: {self.questions} questions, baseline {self.baseline}"
            out.append(table)
        table = Table(title=f"Success@5 by category (all evidence in top {ALL_AT} in brackets)")
        table.add_column("category")
        names = list(self.turn.evaluation.aggregates)
        for name in names:
            table.add_column(name, justify="right")
        for cat, report in self.by_category.items():
            cells = []
            for name in names:
                test = report.tests.get(name, {}).get("Success@5")
                mark = ("▲" if test.delta > 0 else "▼") if test is not None and test.significant else ""
                cells.append(f"{report.evaluation.aggregates[name]['Success@5']:.3f}{mark} "
                             f"({self.all_at_by_category[cat][name]:.3f})")
            table.add_row(f"{cat} ({len(report.evaluation.qids)})", *cells)
        out.append(table)
        if self.by_shape is not None:
            out.append(self.by_shape.table(SHAPE_MEASURES, f"turn level by shape, baseline {self.baseline}"))
        out += self.extra_tables
        if self.packets is not None:
            out += packet_tables(self.packets, DEFAULT_BUDGET, self.ms_per_query, self.negatives)
        return out


def stores_report(runs: StoreRuns, judged: Judged, source: str, baseline: str, judgments: str,
                  **kwargs) -> StoresReport:
    """The report of a comparison whose runs and measures are done."""
    rankings = {p: {qid: [doc for doc, _ in run] for qid, run in per.items()} for p, per in runs.turn.items()}
    decisions = decision_report(runs.rows) if runs.rows else None
    return StoresReport(source, baseline, judgments, judged.turn, judged.session, judged.by_category, judged.all_at,
                        judged.all_at_by_category, decisions, runs.ms, len(runs.asked), len(runs.questions),
                        rankings=rankings, asked={q.qid: q for q in runs.questions}, by_shape=judged.by_shape,
                        session_by_shape=judged.session_by_shape, measures=tuple(judged.turn.measures), **kwargs)
