"""Figures by the question's shape: every comparison's figures over the questions that
gather and over those that point, beside a benchmark's own categories, on every kind of
source (cases, traces, collections, LoCoMo, LongMemEval, imported stores).

A question's shape is read from its text alone by garden/rerank/shape.py (`shape_of`),
never from a category label, so a source without categories (a case suite, a collection's
queries, a trace) is broken down the same way. Where the questions carry evidence turns
(LoCoMo, LongMemEval, imported stores) the judgments say which questions gather too: the
gold gathering class, a question whose evidence turns lie in two or more sittings (a
sitting as `Conversation.sessions()` reads one: a run of turns sharing a date and title).
It is reported as a row of its own beside the rule's, with the agreement between the two:
the rule is checked against the gold, not fitted to it.

Each row is its own comparison: the means over its questions and each pipeline's paired
randomization test against the baseline, Holm-adjusted across pipelines, as for every
question (compare.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from garden.evaluation.compare import CompareReport, compare_values, summary_block
from garden.evaluation.measures import natural_key
from garden.rerank.shape import GATHERING, PINPOINT, SHAPES, shape_of

GOLD = "gold gathering"
ROWS = (GATHERING, PINPOINT, GOLD)
RULE = ("the question's shape, read from its text by garden/rerank/shape.py (never from a category): gathering "
        "(a list, a both or all, a count, an interval, an order, a comparison, two people) or pinpoint")
GOLD_RULE = ("gold gathering, read from the judgments: a question whose evidence turns lie in two or more "
             "sittings (a sitting: a run of turns sharing a date and title)")
CAPTION = "shape read from the question's text (garden/rerank/shape.py)"


def shapes_of(texts: Mapping[str, str]) -> dict[str, str]:
    """qid -> the shape of its question's text (`gathering` or `pinpoint`)."""
    return {qid: shape_of(text).kind for qid, text in texts.items()}


def gold_gathering(sessions: Iterable[str]) -> bool:
    """Whether a question's evidence gathers by the judgments: its evidence turns' sittings
    (one entry per evidence turn, or per judged session) are two or more."""
    return len(set(sessions)) >= 2


def row_labels(shape: str, gold: bool) -> tuple[str, ...]:
    """The rows a question counts in: its shape's, and the gold row when the gold gathers it."""
    return (shape, GOLD) if gold else (shape,)


def shape_groups(texts: Mapping[str, str], gold: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Row -> the qids in it, ordered as ids are everywhere (natural_key): the shape rule's
    rows, and the gold row when `gold` (the gold-gathering qids) is given."""
    kinds = shapes_of(texts)
    qids = sorted(texts, key=natural_key)
    groups = {shape: [q for q in qids if kinds[q] == shape] for shape in SHAPES}
    if gold is not None:
        chosen = set(gold)
        groups[GOLD] = [q for q in qids if q in chosen]
    return groups


def agreement(rule: Iterable[str], gold: Iterable[str]) -> dict:
    """How the shape rule's gathering questions and the gold ones agree: the share of gold
    gathering questions the rule reads as gathering (its recall of the gold), and the share
    of the rule's gathering questions that the gold gathers (its precision); None where
    nothing is there to share."""
    rule, gold = set(rule), set(gold)
    both = len(rule & gold)
    return {"gold_gathering": len(gold), "rule_gathering": len(rule), "both": both,
            "gold_read_as_gathering": both / len(gold) if gold else None,
            "rule_gathering_gold": both / len(rule) if rule else None}


def agreement_line(agreed: Mapping) -> str:
    """The agreement in one sentence, for a table's caption."""
    def share(n: int, of: int, value) -> str:
        return f"{n} of {of}" + (f" ({value:.3f})" if value is not None else "")

    recall = (f"the rule reads {share(agreed['both'], agreed['gold_gathering'], agreed['gold_read_as_gathering'])} "
              "gold gathering questions as gathering"
              if agreed["gold_gathering"] else "no question gathers by the gold")
    precision = (f"of the {agreed['rule_gathering']} it reads as gathering, "
                 f"{share(agreed['both'], agreed['rule_gathering'], agreed['rule_gathering_gold'])} gather by the gold"
                 if agreed["rule_gathering"] else "the rule reads no question as gathering")
    return f"{recall}; {precision}"


def subset(report: CompareReport, qids: Sequence[str], name: str) -> CompareReport | None:
    """`report`'s comparison over the questions `qids` among those it judged: their means and
    tests; None when none of them is judged."""
    evaluation = report.evaluation
    wanted = set(qids)
    chosen = [q for q in evaluation.qids if q in wanted]
    if not chosen:
        return None
    per_query = {p: {m: {q: values[m][q] for q in chosen} for m in evaluation.measures}
                 for p, values in evaluation.per_query.items()}
    return compare_values(per_query, evaluation.measures, report.baseline, name, report.permutations,
                          report.alpha)


@dataclass
class ShapeBreakdown:
    """A comparison's figures by shape: each row's questions and, where it holds any judged
    question, its comparison; and, with a gold row, the rule's agreement with it."""

    groups: dict[str, list[str]]                       # row -> qids
    reports: dict[str, CompareReport]                  # row -> comparison over its judged questions
    agreement: dict | None = None                      # the rule against the gold; None without gold
    extra: dict[str, dict[str, dict]] = field(default_factory=dict)   # row -> key -> JSON beside its figures

    @property
    def baseline(self) -> str:
        return next(iter(self.reports.values())).baseline if self.reports else ""

    def rows_json(self) -> dict[str, dict]:
        return {row: {**summary_block(rep), **self.extra.get(row, {})} for row, rep in self.reports.items()}

    def to_json(self, level: str = "figures") -> dict:
        """The breakdown under `level` (the figures' key: `turn` on a store set)."""
        data = {"shape": RULE, "questions": {row: len(qids) for row, qids in self.groups.items()}}
        if GOLD in self.groups:
            data["gold"] = GOLD_RULE
        data[level] = self.rows_json()
        if self.agreement is not None:
            data["agreement"] = self.agreement
        return data

    def label(self, row: str) -> str:
        return f"{row} ({len(self.groups[row])})"

    def caption(self) -> str:
        text = CAPTION
        if GOLD in self.groups:
            text += "; gold gathering: evidence in two or more sittings, read from the judgments"
        if self.agreement is not None:
            text += "; " + agreement_line(self.agreement)
        return text

    def table(self, measures: Sequence[str] | None = None, title: str = ""):
        """A rich Table: a row per shape and pipeline, a column per measure (every one when
        None), a mark on each difference significant within the row's questions."""
        from rich.table import Table

        measures = list(measures) if measures else (next(iter(self.reports.values())).measures
                                                     if self.reports else [])
        table = Table(title=title or f"by shape, baseline {self.baseline}", caption_justify="left")
        table.add_column("shape")
        table.add_column("pipeline")
        for m in measures:
            table.add_column(m, justify="right")
        for row, rep in self.reports.items():
            for n, (name, values) in enumerate(rep.evaluation.aggregates.items()):
                table.add_row(self.label(row) if n == 0 else "", name,
                              *(marked(rep, name, m, values[m]) for m in measures))
        empty = [self.label(row) for row in self.groups if row not in self.reports]
        first = next(iter(self.reports.values()), None)
        marks = ([f"▲/▼ p < {first.alpha} vs {self.baseline} within the row (paired randomization"
                  + (", Holm-adjusted)" if first.correction == "holm" else ")")] if first is not None else [])
        table.caption = "; ".join(marks + [self.caption()]
                                  + ([f"no judged question: {', '.join(empty)}"] if empty else []))
        return table


def marked(report: CompareReport, pipeline: str, measure: str, value: float, digits: int = 3) -> str:
    """A figure with its mark when it differs significantly from the baseline's."""
    test = report.tests.get(pipeline, {}).get(measure)
    mark = ("▲" if test.delta > 0 else "▼") if test is not None and test.significant else ""
    return f"{value:.{digits}f}{mark}"


def by_shape(report: CompareReport, texts: Mapping[str, str], gold: Iterable[str] | None = None) -> ShapeBreakdown:
    """`report`'s figures by shape (see the module docstring): `texts` is qid -> question
    text for (at least) the questions it judged; `gold`, the gold-gathering qids, where the
    judgments say which questions gather."""
    judged = {q: texts[q] for q in report.evaluation.qids}
    groups = shape_groups(judged, gold)
    reports = {row: rep for row, qids in groups.items()
               if (rep := subset(report, qids, f"{report.collection}, {row}")) is not None}
    agreed = agreement(groups[GATHERING], groups[GOLD]) if GOLD in groups else None
    return ShapeBreakdown(groups, reports, agreed)
