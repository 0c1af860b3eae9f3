"""`garden compare` on LoCoMo: every pipeline ranks each question's conversation, judged by
its evidence turns, at turn and at session level, by category, with the packet it serves.

The conversations are read from a LoCoMo file or folder (either layout; see
garden/formats/locomo.py, and cite LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0) or from
the output of `garden import locomo` (its `fixtures/locomo-*.yaml` and `cases/`). A
question is judged when it has at least one evidence turn; its relevant documents are its
evidence turns (ABOUT.md of the data: 1,425 such questions in the seven conversations).

One rule turns every pipeline's ranking into a ranking of turns (`turn_ranking`): a turn
stands for itself; a record citing turns (an observation, a session summary) stands, at
its own position, for the turns it cites that are not ranked yet, in the order of the
pipeline's own scores for them (a turn it did not score counts 0), ties in story order;
anything else is left out. Session level: a session is ranked where its first turn is.

Bare retrievers rank the whole story (turns, observations, summaries) as one batch; a
structured pipeline runs its stages per question with `candidates` raised to the depth and
ranks by the reranker's score (`Ranked.by_relevance`). The packet a user would get is the
pipeline's own run at the default budget (garden/evaluation/packets.py). Negatives, built
from the stores (`--negatives foreign`, garden/evaluation/negatives.py) or declared by an
imported case (`unanswerable: true`), are asked like any question and judged only by what
the user gets: no ranking measure is defined for a question that nothing answers.
"""
from __future__ import annotations

import datetime as dt
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from garden.errors import GardenError
from garden.derived.home import derived_folder
from garden.evaluation.compare import ALPHA, PERMUTATIONS, CompareReport, compare_runs
from garden.evaluation.negatives import FOREIGN_HOW, NEGATIVE_KINDS, SEED as NEGATIVES_SEED, foreign_negatives
from garden.evaluation.packets import PacketRow, decision_report, packet_row, packet_tables, plot_decisions
from garden.models import DEFAULT_BUDGET, Settings, Story
from garden.rerank.premise import WARNING as PREMISE_WARNING

TURN_MEASURES = ("Success@1", "Success@5", "Success@10", "R@5", "R@10", "nDCG@10")
ALL_AT = 5            # the share of questions with every evidence turn in the top 5
DEPTH = 100           # records a pipeline ranks per question; @10 is the deepest measure
TURN_KIND = "source"
CATEGORY = re.compile(r"category (\d+) \(([^)]*)\)")


@dataclass
class Question:
    qid: str                 # <story>/<case id>
    text: str
    category: str            # "4 single-hop"
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


def _category(text: str | None) -> str:
    m = CATEGORY.search(text or "")
    return f"{m.group(1)} {m.group(2)}" if m else "uncategorized"


def _questions(story: Story, cases: Sequence[dict]) -> list[Question]:
    """The judged questions: a case naming an evidence turn, and a case that declares itself
    unanswerable (`expect: {unanswerable: true}`), which is a negative."""
    turns = {r.id for r in story.records if r.kind == TURN_KIND}
    out = []
    for case in cases:
        expect = case.get("expect") or {}
        evidence = [rid for rid in expect.get("include", []) if rid in turns]
        declared = expect.get("unanswerable") is True
        if evidence or declared:
            out.append(Question(f"{story.story}/{case['id']}", case["query"], _category(case.get("category")),
                                [] if declared else evidence, dt.date.fromisoformat(str(case["as_of"])),
                                negative="declared" if declared else None))
    return out


def is_locomo(path: Path) -> bool:
    """A LoCoMo file (`.json`: collections are folders, traces `.jsonl`, cases `.yaml`), a
    folder holding `.json` files, or the output of `garden import locomo`. Whether the JSON
    is really LoCoMo is the reader's to say, with a located line."""
    if path.is_dir():
        if any((path / "fixtures").glob("locomo-*.yaml")) and (path / "cases").is_dir():
            return True
        return any(p.is_file() for p in path.glob("*.json"))
    return path.suffix == ".json"


def load_conversations(path: str | Path) -> list[Conversation]:
    """The conversations and judged questions under `path` (see the module docstring)."""
    path = Path(path)
    if path.is_dir() and (path / "fixtures").is_dir() and (path / "cases").is_dir():
        return _load_imported(path)
    from garden.formats.locomo import build, read_conversations

    out = []
    for conv in read_conversations(path):
        imported = build(conv)
        story = Story.model_validate(imported.story)
        out.append(Conversation(story, _questions(story, list(imported.cases.values()))))
    return out


def _load_imported(root: Path) -> list[Conversation]:
    from garden.formats.stories import load_story
    from garden.formats.yaml_reader import read_yaml

    out = []
    for file in sorted((root / "fixtures").glob("locomo-*.yaml")):
        story = load_story(file)
        cases = [read_yaml(f) for f in sorted((root / "cases" / file.stem).glob("*.yaml"))]
        out.append(Conversation(story, _questions(story, [c for c in cases if isinstance(c, dict)])))
    if not out:
        raise GardenError(f"{root}: no fixtures/locomo-*.yaml to compare on")
    return out


# --- one rule from a ranking of records to a ranking of turns ---------------------------


def turn_ranking(story: Story, ranking: Sequence[tuple[str, float]], depth: int = DEPTH) -> list[str]:
    """The turns a ranking of records stands for, best first (see the module docstring)."""
    scores = dict(ranking)
    order = {r.id: i for i, r in enumerate(story.records)}
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


def _as_run(ranked: Sequence[str]) -> list[tuple[str, float]]:
    """Scores that keep the order (ir-measures sorts by score)."""
    return [(doc, float(len(ranked) - i)) for i, doc in enumerate(ranked)]


def _sessions_run(turns: Sequence[str], session_of: dict[str, str]) -> list[str]:
    out: list[str] = []
    for t in turns:
        s = session_of[t]
        if s not in out:
            out.append(s)
    return out


# --- running the pipelines -------------------------------------------------------------


def _rank_conversation(pipeline, conv: Conversation, depth: int, questions: Sequence[Question] | None = None,
                       settings: Settings | None = None) -> list[list[tuple[str, float]]]:
    from garden.pipelines.structured import StructuredPipeline

    questions = conv.questions if questions is None else questions
    if pipeline == FUSION_NAME:
        return five_list_fusion(conv, depth, questions)
    from garden.rerank.query import QuerySpec
    from garden.retrievers import as_retriever

    if isinstance(pipeline, StructuredPipeline):
        settings = (settings or Settings()).merged(Settings(candidates=depth))
        return [pipeline.ranking(QuerySpec(conv.story, q.text, q.as_of, settings=settings), depth).by_relevance(depth)
                for q in questions]
    retriever = as_retriever(pipeline.indexes.retriever(conv.story, pipeline.name))
    return retriever.top_many([q.text for q in questions], depth)


def _prepare(pipeline, story: Story) -> None:
    from garden.pipelines.ranking import prepare
    from garden.pipelines.structured import StructuredPipeline

    if pipeline == FUSION_NAME:
        return
    if isinstance(pipeline, StructuredPipeline):
        prepare(pipeline, story)
    else:
        pipeline.indexes.retriever(story, pipeline.name)


def _packets(pipeline, conv: Conversation, questions: Sequence[Question], budget: int,
             rankings: Sequence[Sequence[tuple[str, float]]]) -> list[PacketRow]:
    from garden.analyzer import analyze
    from garden.rerank.decide import gate_score
    from garden.rerank.query import QuerySpec

    out = []
    for q, ranking in zip(questions, rankings):
        outcome = pipeline.run(QuerySpec(conv.story, q.text, q.as_of, budget=budget))
        packet = outcome.packet
        flagged = any(w.startswith(PREMISE_WARNING) for w in packet.warnings)
        out.append(packet_row(q, packet, conv.story, gate_score(outcome.stages), [s for _, s in ranking],
                              len(analyze(q.text)), flagged))
    return out


@dataclass
class LocomoReport:
    source: str
    baseline: str
    turn: CompareReport
    session: CompareReport
    by_category: dict[str, CompareReport]
    all_at: dict[str, float]                       # pipeline -> share with every evidence turn in the top ALL_AT
    all_at_by_category: dict[str, dict[str, float]]
    packets: DecisionReport | None                 # what the user gets, answerable questions and negatives
    ms_per_query: dict[str, float]
    conversations: int
    questions: int
    negatives: dict | None = None                  # how the negatives were built, and how many
    plot: str | None = None                        # the risk-coverage PNG, when written
    # what was judged, for side-by-side views (not in the JSON): pipeline -> qid -> turns, best first
    rankings: dict[str, dict[str, list[str]]] = field(default_factory=dict, repr=False)
    asked: dict[str, Question] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict:
        def block(report: CompareReport) -> dict:
            j = report.to_json()
            return {"queries": j["queries"], "pipelines": j["pipelines"], "tests": j["tests"]}

        return {
            "source": self.source,
            "judgments": "LoCoMo evidence turns (Maharana et al., ACL 2024; CC BY-NC 4.0): a question's "
                         "relevant documents are its evidence turns; derived records stand for the turns they cite",
            "conversations": self.conversations,
            "questions": self.questions,
            "baseline": self.baseline,
            "measures": list(TURN_MEASURES),
            "turn": {**block(self.turn), f"all_evidence@{ALL_AT}": self.all_at},
            "session": block(self.session),
            "by_category": {cat: {**block(rep), f"all_evidence@{ALL_AT}": self.all_at_by_category[cat]}
                            for cat, rep in self.by_category.items()},
            "negatives": self.negatives,
            "packet": self.packets.to_json() if self.packets else None,
            "risk_coverage_plot": self.plot,
            "ms_per_query": self.ms_per_query,
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    def show(self) -> None:
        from rich.console import Console

        console = Console(width=160)
        for table in self.tables():
            console.print(table)

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
                mark = (" ▲" if test.delta > 0 else " ▼") if test is not None and test.significant else ""
                cells.append(f"{report.evaluation.aggregates[name]['Success@5']:.3f}{mark} "
                             f"({self.all_at_by_category[cat][name]:.3f})")
            table.add_row(f"{cat} ({len(report.evaluation.qids)})", *cells)
        out.append(table)
        if self.packets is not None:
            out += packet_tables(self.packets, DEFAULT_BUDGET, self.ms_per_query, self.negatives)
        return out


def compare_locomo(path: str | Path, pipelines: Sequence[str], baseline: str | None = None,
                   depth: int = DEPTH, budget: int = DEFAULT_BUDGET, packets: bool = True,
                   permutations: int = PERMUTATIONS, alpha: float = ALPHA, negatives: str | None = None,
                   negatives_per_store: int | None = None, negatives_seed: int = NEGATIVES_SEED,
                   plot: str | Path | None = None) -> LocomoReport:
    """Everything `garden compare` does on LoCoMo short of printing. `negatives` adds
    unanswerable questions built from the stores themselves (see negatives.py); a case that
    declares itself unanswerable is one already. Negatives are judged by their decision and
    packet only: no ranking measure is defined for a question nothing answers."""
    from garden.pipelines import check_pipeline, make_pipeline

    if not pipelines:
        raise GardenError("no pipeline to compare")
    for p in pipelines:
        if p != FUSION_NAME:
            check_pipeline(p)
    baseline = baseline or pipelines[0]
    if baseline not in pipelines:
        raise GardenError(f"baseline {baseline!r} is not among the pipelines: {', '.join(pipelines)}")
    if negatives is not None and negatives not in NEGATIVE_KINDS:
        raise GardenError(f"negatives {negatives!r}: choose one of {', '.join(NEGATIVE_KINDS)}")
    if negatives is None and negatives_per_store is not None:
        raise GardenError("a count of negatives per store needs a kind of negatives to build (foreign)")
    conversations = load_conversations(path)
    added = foreign_negatives(conversations, negatives_per_store, negatives_seed) if negatives else {}
    asked = {c.story.story: c.questions + added.get(c.story.story, []) for c in conversations}
    questions = [q for c in conversations for q in c.questions if q.evidence]
    if not questions:
        raise GardenError(f"{path}: no question names an evidence turn: nothing to judge")
    turn_runs: dict[str, dict] = {p: {} for p in pipelines}
    session_runs: dict[str, dict] = {p: {} for p in pipelines}
    rows: dict[str, list[PacketRow]] = {}
    ms: dict[str, float] = {}
    for name in pipelines:
        pipeline = FUSION_NAME if name == FUSION_NAME else make_pipeline(name)
        elapsed = 0.0
        for conv in conversations:
            _prepare(pipeline, conv.story)  # indexes built before the clock starts
            mine = asked[conv.story.story]
            start = time.perf_counter()
            rankings = _rank_conversation(pipeline, conv, depth, mine)
            elapsed += time.perf_counter() - start
            session_of = conv.sessions()
            for q, ranking in zip(mine, rankings):
                if not q.evidence:
                    continue
                turns = turn_ranking(conv.story, ranking, depth)
                turn_runs[name][q.qid] = _as_run(turns)
                session_runs[name][q.qid] = _as_run(_sessions_run(turns, session_of))
            if packets and pipeline != FUSION_NAME:  # a ranking of turns, not a pipeline: no packet
                rows.setdefault(name, []).extend(_packets(pipeline, conv, mine, budget, rankings))
        ms[name] = 1e3 * elapsed / sum(len(v) for v in asked.values())
    turn_qrels = {q.qid: {t: 1 for t in q.evidence} for q in questions}
    session_qrels = {}
    for conv in conversations:
        session_of = conv.sessions()
        for q in conv.questions:
            if q.evidence:
                session_qrels[q.qid] = {session_of[t]: 1 for t in q.evidence}
    name = str(path)
    speed = {p: 1e3 / v for p, v in ms.items() if v > 0}
    turn = compare_runs(turn_qrels, turn_runs, baseline, TURN_MEASURES, speed, name=name, permutations=permutations,
                        alpha=alpha)
    session = compare_runs(session_qrels, session_runs, baseline, TURN_MEASURES, name=name,
                           permutations=permutations, alpha=alpha)
    by_category, all_by_category = {}, {}
    for cat in sorted({q.category for q in questions}):
        qrels = {q.qid: turn_qrels[q.qid] for q in questions if q.category == cat}
        by_category[cat] = compare_runs(qrels, turn_runs, baseline, TURN_MEASURES, name=f"{name} {cat}",
                                        permutations=permutations, alpha=alpha)
        all_by_category[cat] = _all_evidence(by_category[cat])
    rankings = {p: {qid: [doc for doc, _ in run] for qid, run in runs.items()} for p, runs in turn_runs.items()}
    decisions = decision_report(rows) if rows else None
    built = _negatives_note(asked, negatives, negatives_per_store, negatives_seed)
    written = None
    if decisions is not None and built is not None:
        written = plot_decisions(decisions, plot or derived_folder("reports") / "locomo-risk-coverage.png",
                                 f"{Path(name).name}: answer or stay silent ({built['negatives']} negatives)")
    return LocomoReport(name, baseline, turn, session, by_category, _all_evidence(turn), all_by_category, decisions,
                        ms, len(conversations), len(questions), built, written, rankings,
                        {q.qid: q for q in questions})


def _negatives_note(asked: dict[str, list[Question]], kind: str | None, per_store: int | None,
                    seed: int) -> dict | None:
    """How the comparison's negatives were built, for the report; None when it has none."""
    found = [q for qs in asked.values() for q in qs if not q.evidence]
    if not found:
        return None
    counts = {story: sum(1 for q in qs if not q.evidence) for story, qs in asked.items()}
    how = []
    if kind == "foreign":
        how.append(f"foreign: {FOREIGN_HOW} (seed {seed}, {per_store or 'as many as the smallest store asks'} "
                   f"per store)")
    if any(q.negative == "declared" for q in found):
        how.append("declared: cases that say `unanswerable: true`")
    return {"kind": " and ".join(sorted({q.negative for q in found})), "negatives": len(found),
            "per_store": counts, "how": "; ".join(how),
            "judgments": "nothing in this store answers it: no relevant record"}


def _all_evidence(report: CompareReport) -> dict[str, float]:
    """Share of questions whose every evidence turn is in the top ALL_AT: R@5 = 1."""
    ev = report.evaluation
    return {p: float(np.mean(ev.values(p, f"R@{ALL_AT}") >= 1 - 1e-9)) for p in ev.per_query}


# --- the reference fusion ABOUT.md reports -----------------------------------------------

FUSION_NAME = "locomo-fusion"
FUSION_K = 60


def _expanded(story: Story, ranking: Sequence[tuple[str, float]]) -> list[str]:
    """A ranking of turns from a ranking of observations: each hit stands for its turns."""
    out: list[str] = []
    for rid, _ in ranking:
        for tid in story.by_id[rid].sources if rid in story.by_id else ():
            if tid not in out and tid in story.by_id and story.by_id[tid].kind == TURN_KIND:
                out.append(tid)
    return out


def five_list_fusion(conv: Conversation, depth: int = DEPTH,
                     questions: Sequence[Question] | None = None) -> list[list[tuple[str, float]]]:
    """The plain reciprocal-rank fusion (k = 60) of five lists that the data's ABOUT.md
    reports as its strongest reference (Success@1 0.429, Success@5 0.661, nDCG@10 0.552):
    bm25s over the turns, over the observations (each hit standing for the turns it cites),
    and over each turn with the turn before it in its session prepended; MiniLM over the
    turns and over the observations (as the story holds them, with their session stamp),
    these two at weight 0.5. No structure: a reference for
    `default` to beat, so that fusion alone is not mistaken for structure (Cormack, Clarke &
    Buettcher 2009, "Reciprocal rank fusion outperforms Condorcet and individual rank
    learning methods")."""
    from garden.retrievers import Doc, make_retriever

    story = conv.story
    turns = [r for r in story.records if r.kind == TURN_KIND]
    notes = [r for r in story.records if r.kind == "note" and r.sources]
    session_of = conv.sessions()
    with_previous = [Doc(t.id, f"{p.text} {t.text}" if p is not None and session_of[p.id] == session_of[t.id]
                         else t.text) for p, t in zip([None, *turns[:-1]], turns)]
    corpora = {
        "bm25s turns": ("bm25s", [Doc(t.id, t.text) for t in turns], 1.0, False),
        "bm25s observations": ("bm25s", [Doc(n.id, n.text) for n in notes], 1.0, True),
        "bm25s turn with previous": ("bm25s", with_previous, 1.0, False),
        # MiniLM reads the records as the garden indexes them (with their titles), so their
        # embeddings are the ones every pipeline has cached: one encoding, not two
        "dense turns": ("dense", [Doc(t.id, t.searchable) for t in turns], 0.5, False),
        "dense observations": ("dense", [Doc(n.id, n.searchable) for n in notes], 0.5, True),
    }
    texts = [q.text for q in (conv.questions if questions is None else questions)]
    fused: list[dict[str, float]] = [{} for _ in texts]
    for name, docs, weight, expand in corpora.values():
        retriever = make_retriever(name)
        retriever.index(docs)
        for i, ranking in enumerate(retriever.top_many(texts, None)):
            ids = _expanded(story, ranking) if expand else [rid for rid, _ in ranking]
            for rank, rid in enumerate(ids, 1):
                fused[i][rid] = fused[i].get(rid, 0.0) + weight / (FUSION_K + rank)
    order = {t.id: n for n, t in enumerate(turns)}
    return [sorted(f.items(), key=lambda kv: (-kv[1], order[kv[0]]))[:depth] for f in fused]
