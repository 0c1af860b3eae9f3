"""`garden compare` on LongMemEval (Wu et al., ICLR 2025, "LongMemEval: Benchmarking Chat
Assistants on Long-Term Interactive Memory"; MIT): every question's own haystack is a
store, and every pipeline ranks it and serves its packet.

The source is a released file (`longmemeval_oracle.json`, `_s`, `_m`, their `_cleaned`
versions, gzipped or not), read as `garden import longmemeval` reads it and streamed, one
question's haystack at a time; or that import's output folder (`fixtures/longmemeval-*`
and `cases/`). Each question is built exactly as the import builds it, so the two give the
same figures.

Two scorings, one set of rankings (garden/evaluation/stores.py turns each pipeline's
ranking into a ranking of turns, cut at `depth`, DEPTH by default):

- `garden` (always): the garden's measures (ir-measures), a question's relevant documents
  its evidence turns, the turns marked `has_answer` inside its evidence sessions, of
  either role; at session level the sessions holding them; by question type.
- `longmemeval` (`--scoring longmemeval`, added beside): the authors' own
  (garden/evaluation/longmemeval_scoring.py): their gold (the user turns marked
  `has_answer` in evidence sessions whose id begins `answer_`), their corpus (the
  haystack's user turns: a pipeline's ranking is read over its user turns only, since
  only those are indexed in their evaluation), their discount and ideal, their k (1, 3, 5,
  10, 30, 50), at turn level and at session level: the pipeline's own ranking of sittings
  (garden/rerank/sittings.py) read over their session corpus, the sessions of user turns,
  as they score a retriever that ranks sessions; abstention questions and questions with
  no user-side evidence turn are left out. The haystack's turns are ranked as the garden
  indexes them (both roles), so a figure here is the garden's ranking scored by the
  authors' rules, not a rerun of their retrievers.

Abstention questions (ids ending `_abs`) are negatives: nothing in the haystack answers
them, so they are judged by the decision and the packet only (answered or silent, and the
gate's AUROC against the answerable questions). A question with neither an evidence turn
nor the abstention mark is not asked, and is counted.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, Sequence

from garden.formats.layout import STORY_FOLDER
from garden.derived.home import derived_folder
from garden.errors import GardenError
from garden.evaluation.compare import ALPHA, PERMUTATIONS, CompareReport, compare_values, summary_block
from garden.evaluation.locomo import check_comparison, made_pipelines
from garden.evaluation.longmemeval_scoring import EVIDENCE_PREFIX, KS, measures
from garden.evaluation.packets import plot_decisions
from garden.evaluation.published import AGAINST, MEASURES, beside_published, published_table
from garden.evaluation.shapes import ShapeBreakdown, by_shape, gold_gathering, marked
from garden.evaluation.stores import (TURN_KIND, Conversation, Question, StoresReport, iter_imported,
                                      judge_runs, run_stores, sittings_run, store_measures, stores_report,
                                      write_store_runs)
from garden.models import DEFAULT_BUDGET, Story

SCORINGS = ("garden", "longmemeval")
# records ranked per question: past an S haystack (about 500 turns), so the authors' session
# level at k 30 and 50, which grows its depth until k sessions are covered, reads a whole
# ranking; an M haystack (about 5,000 turns) is cut here
DEPTH = 1000
AUTHORS_SHOWN = ("recall_any@5", "recall_all@5", "ndcg_any@5", "recall_any@10", "recall_all@10", "ndcg_any@10")
USER = "user"
JUDGMENTS = ("LongMemEval evidence turns (Wu et al., ICLR 2025; MIT): the turns marked has_answer inside a "
             "question's evidence sessions, of either role; derived records stand for the turns they cite; "
             "abstention questions are negatives (nothing in the haystack answers them)")
AUTHORS_JUDGMENTS = ("the authors' rules: gold turns are the user turns marked has_answer in evidence sessions "
                     "whose id begins answer_, gold sessions the sessions holding them; turn level reads the turn "
                     "ranking over the haystack's user turns, session level the ranking of sittings over its "
                     "sessions of user turns; DCG = rel_1 + sum_{i>=2} rel_i / log2(i) over the corpus's "
                     "ideal; abstention questions and those with no user-side evidence turn left out")


def is_longmemeval(path: Path) -> bool:
    """The output of `garden import longmemeval`, or a file that is LongMemEval's, by the
    markers garden/formats/sources.py reads. Whether it really is LongMemEval is the
    reader's to say, with located lines."""
    from garden.formats.sources import markers

    return "longmemeval" in markers(path)


def _type(text: str | None) -> str:
    return text if text else "uncategorized"


def conversation_of(built) -> Conversation:
    """A built haystack (garden/formats/longmemeval.py's `read_built`) as a conversation
    with its question; no question when it is left unjudged."""
    question = Question(f"{built.name}/{built.key}", built.case["query"], built.qtype,
                        [] if built.abstention else list(built.evidence), built.case["as_of"],
                        negative="declared" if built.abstention else None)
    return Conversation(built.story, [] if built.unjudged else [question])


class _Source:
    """The stores of a file or an imported folder, read one at a time, and what was left
    out on the way."""

    def __init__(self, path: Path):
        self.path, self.unjudged = path, 0
        if path.is_dir():
            self.report = None
            if not any((path / STORY_FOLDER).glob("longmemeval-*")):
                raise GardenError(f"{path}: no fixtures/longmemeval-* to compare on")
        else:
            from garden.formats.longmemeval import read_built

            self.report, self._built = read_built(path)

    def __iter__(self) -> Iterator[tuple[Conversation, list[Question]]]:
        stores = (conversation_of(b) for b in self._built) if self.report is not None else \
            iter_imported(self.path, "longmemeval-*", _type)
        for conv in stores:
            if not conv.questions:
                self.unjudged += 1
            yield conv, conv.questions


def stores_of_source(path: str | Path) -> list[Conversation]:
    """Every store of a LongMemEval file or its import, with its questions (`garden tune`)."""
    return [conv for conv, _ in _Source(Path(path))]


class AuthorsScoring:
    """The authors' measures of every pipeline's turn ranking, collected as the runs go
    (see the module docstring): level -> pipeline -> measure -> qid -> value."""

    def __init__(self):
        self.values: dict[str, dict[str, dict[str, dict[str, float]]]] = {"turn": {}, "session": {}}
        self.category: dict[str, str] = {}
        self.texts: dict[str, str] = {}     # qid -> question, for the breakdown by shape
        self.gold_gathering: set[str] = set()   # qids whose evidence lies in two or more sittings

    @staticmethod
    def gold(story: Story, question: Question) -> list[str]:
        """The authors' gold turns of a question (see the module docstring)."""
        return [t for t in question.evidence
                if story.by_id[t].speaker == USER and _session(t).startswith(EVIDENCE_PREFIX)]

    def __call__(self, pipeline: str, conv: Conversation, question: Question, turns: list[str],
                 sittings: list[tuple[str, ...]]) -> None:
        story = conv.story
        gold = self.gold(story, question)
        if not gold:
            return
        # their turn corpus, the user turns, each with its session; their session corpus, the
        # sessions of user turns
        session_of = story.remembered("longmemeval user turns", lambda s: {
            r.id: _session(r.id) for r in s.records if r.kind == TURN_KIND and r.speaker == USER})
        corpus = list(session_of)
        sessions = list(dict.fromkeys(session_of.values()))
        ranked = sittings_run(sittings, session_of)
        gold_sessions = {_session(t) for t in gold}
        ranking = [t for t in turns if t in session_of]
        self.category[question.qid] = question.category
        self.texts[question.qid] = question.text
        if gold_gathering(conv.sessions()[t] for t in question.evidence):
            self.gold_gathering.add(question.qid)
        for level in ("turn", "session"):
            table = self.values[level].setdefault(pipeline, {})
            for k in KS:
                got = (measures(ranking, gold, corpus, k) if level == "turn"
                       else measures(ranked, gold_sessions, sessions, k))
                for name, value in got.items():
                    table.setdefault(name, {})[question.qid] = value

    def reports(self, baseline: str, source: str, permutations: int, alpha: float) -> dict:
        """level -> ("all" | question type) -> CompareReport; {} when no question has the
        authors' gold. The breakdown by shape of each level's "all" is `shapes`."""
        if not self.category:
            return {}
        names = [f"{m}@{k}" for k in KS for m in ("recall_any", "recall_all", "ndcg_any")]
        out: dict[str, dict[str, CompareReport]] = {}
        for level, per_query in self.values.items():
            out[level] = {"all": compare_values(per_query, names, baseline, f"{source} (authors' scoring, {level})",
                                                permutations, alpha)}
            for cat in sorted(set(self.category.values())):
                chosen = {q for q, c in self.category.items() if c == cat}
                subset = {p: {m: {q: v for q, v in values.items() if q in chosen} for m, values in table.items()}
                          for p, table in per_query.items()}
                out[level][cat] = compare_values(subset, names, baseline, f"{source} {cat}", permutations, alpha)
        return out

    def shapes(self, reports: dict) -> dict[str, ShapeBreakdown]:
        """level -> the authors' measures by shape, the gold gathering row beside the rule's."""
        return {level: by_shape(by["all"], self.texts, self.gold_gathering) for level, by in reports.items()}


def _session(turn_id: str) -> str:
    """A turn's session: its id up to the last dot (the import names a turn <session>.<n>)."""
    return turn_id.rsplit(".", 1)[0]


def _authors_json(reports: dict, shapes: dict[str, ShapeBreakdown]) -> dict:
    return {"judgments": AUTHORS_JUDGMENTS, "ks": list(KS),
            **{level: {"all": summary_block(by["all"]),
                       "by_type": {c: summary_block(r) for c, r in by.items() if c != "all"},
                       "by_shape": shapes[level].to_json()}
               for level, by in reports.items()}}


def _authors_tables(reports: dict, shapes: dict[str, ShapeBreakdown]) -> list:
    from rich.table import Table

    out = []
    for level, by in reports.items():
        report = by["all"]
        # the shown columns only; the JSON carries every k
        table = Table(title=f"{report.collection}: {len(report.evaluation.qids)} questions, "
                            f"baseline {report.baseline}",
                      caption=f"▲/▼ p < {report.alpha} vs {report.baseline} (paired randomization"
                              + (", Holm-adjusted)" if report.correction == "holm" else ")")
                              + f"; then by type and by {shapes[level].caption()}")
        table.add_column("pipeline / type")
        for m in AUTHORS_SHOWN:
            table.add_column(m, justify="right")
        for cat, rep in [*by.items(), *shapes[level].reports.items()]:
            for name, values in rep.evaluation.aggregates.items():
                label = name if cat == "all" else f"  {name}, {cat} ({len(rep.evaluation.qids)})"
                table.add_row(label, *(marked(rep, name, m, values[m]) for m in AUTHORS_SHOWN))
        out.append(table)
    return out


def compare_longmemeval(path: str | Path, pipelines: Sequence[str], baseline: str | None = None,
                        scoring: str = "garden", depth: int = DEPTH, budget: int = DEFAULT_BUDGET,
                        packets: bool = True, permutations: int = PERMUTATIONS, alpha: float = ALPHA,
                        plot: str | Path | None = None, against: str | None = None,
                        metrics: Sequence[str] | None = None, trec_dir: str | Path | None = None) -> StoresReport:
    """Everything `garden compare` does on LongMemEval short of printing (see the module
    docstring). `scoring` "longmemeval" adds the authors' measures beside the garden's;
    `against` "published" sets their session measures beside the published figures
    (garden/evaluation/published.py), and needs those measures, so it implies that scoring.
    `metrics` adds measures to the garden's fixed ones; `trec_dir` receives the runs and
    qrels of both levels."""
    if scoring not in SCORINGS:
        raise GardenError(f"`scoring` {scoring!r}: choose one of {', '.join(SCORINGS)}")
    if against is not None and against not in AGAINST:
        raise GardenError(f"`against` {against!r}: choose one of {', '.join(AGAINST)}")
    scoring = "longmemeval" if against is not None else scoring
    baseline = check_comparison(pipelines, baseline)
    measures = store_measures(metrics)
    from garden.evaluation.locomo import FUSION_NAME

    if FUSION_NAME in pipelines:
        raise GardenError(f"pipeline {FUSION_NAME!r} is a reference for LoCoMo only: {path} is LongMemEval")
    path = Path(path)
    source = _Source(path)
    authors = AuthorsScoring() if scoring == "longmemeval" else None
    runs = run_stores(source, made_pipelines(pipelines), depth, budget, packets, on_turns=authors)
    name = str(path)
    if not runs.questions:
        raise GardenError(f"{name}: no question names an evidence turn: nothing to judge")
    judged = judge_runs(runs, baseline, name, permutations, alpha, measures)
    if trec_dir is not None:
        write_store_runs(runs, trec_dir)
    negatives = [q for qs in runs.asked.values() for q in qs if not q.evidence]
    note = {"kind": "declared", "negatives": len(negatives), "per_store": None,
            "how": "LongMemEval's abstention questions (ids ending _abs): their haystack holds no answer",
            "judgments": "nothing in this store answers it: no relevant record"} if negatives else None
    extra = {"stores": {"asked": len(runs.asked) - source.unjudged, "unjudged": source.unjudged},
             "depth": depth}
    tables = []
    if authors is not None:
        reports = authors.reports(baseline, name, permutations, alpha)
        shapes = authors.shapes(reports)
        extra["longmemeval_scoring"] = _authors_json(reports, shapes) if reports else None
        tables = _authors_tables(reports, shapes) if reports else []
        if against is not None and reports:
            session = reports["session"]["all"].evaluation
            rows = beside_published({p: {m: values[m] for m in MEASURES} for p, values in session.aggregates.items()},
                                    len(session.qids), path.name)
            extra["published"] = rows
            tables.append(published_table(rows))
    report = stores_report(runs, judged, name, baseline, JUDGMENTS, negatives=note, extra=extra,
                           extra_tables=tables, stores_word="haystacks")
    if report.packets is not None and note is not None:
        target = plot or derived_folder("reports") / "longmemeval-risk-coverage.png"
        report.plot = plot_decisions(report.packets, target,
                                     f"{path.name}: answer or stay silent ({len(negatives)} abstention questions)")
    return report
