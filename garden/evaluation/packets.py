"""What the user gets: each pipeline's packet and decision on answerable questions and on
negatives, and how well each pipeline's gate (and query-performance predictors computed
from the same ranking) tells the two apart.

Per question a pipeline's run gives one `PacketRow`. Over a group of questions:

- answered / asked / silent: the share given items, a question back, or nothing;
- evidence coverage: the share of a question's evidence turns in the packet (packed
  themselves, or cited by a packed item), averaged over answerable questions with a
  silent packet counting 0; and the same over answered packets only;
- evidence shown: the same share counting only what the packet shows, an evidence turn
  packed itself or cited by a packed item that is not a view. A view (a session's
  summary, an index) "points at evidence rather than being it" (DESIGN.md): it cites
  every turn of its session, and a packet holding it is covered for all of them while it
  restates few. The gap between the two figures is what the packet owes to views;
- a passage (an item that rides as a span of a long record, garden/rerank/passage.py)
  counts as its record in all three: its id is the record's. It pays only for its own
  characters, so a packet of passages holds more records; whether the span still holds
  the answer is not something these measures can see (experiments/passages.py checks the
  answer's words in the packet's text);
- precision: the share of packed items that are evidence or cite evidence, averaged
  over answered packets of answerable questions (every item packed for a negative is
  wrong, which the negatives' answered rate already says);
- characters and items, averaged over all questions of the group.

The gate's AUROC: the score a pipeline's gate thresholds (higher = answer), answerable
questions against negatives (`abstention.auroc`). A bare retriever has no gate: it always
answers, and its AUROC is not defined. The predictors (abstention.PREDICTORS) read the
ranking the comparison judges, to its depth.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from garden.evaluation.abstention import PREDICTORS, auroc, operating_point, risk_coverage
from garden.evaluation.shapes import CAPTION as SHAPE_CAPTION, GOLD, ROWS as SHAPE_ROWS, row_labels
from garden.rerank.shape import shape_of

DECISIONS = ("answered", "asked", "silent")
ANSWERABLE, NEGATIVE = "answerable", "negatives"


@dataclass
class PacketRow:
    qid: str
    category: str
    negative: bool
    outcome: str                 # one of DECISIONS
    covered: float | None        # share of evidence turns in the packet; None for a negative
    precision: float | None      # share of packed items that are or cite evidence; None when nothing is packed
    chars: int
    items: int
    flagged: bool = False        # a premise warning on the packet
    gate: float | None = None    # the score the pipeline's gate thresholds; None: no gate
    predictors: dict[str, float] = field(default_factory=dict)
    shown: float | None = None   # share of evidence turns shown, not only pointed at by a view
    store: str = ""              # the store asked
    threshold: float | None = None   # the least support the store answers at (its level + answer_at); None: no gate
    shape: str = ""              # gathering or pinpoint, read from the question's text (garden/rerank/shape.py)
    gold_gathering: bool = False  # its evidence lies in two or more sittings, by the judgments

    @property
    def shape_rows(self) -> tuple[str, ...]:
        """The by-shape rows it counts in (garden/evaluation/shapes.py)."""
        return row_labels(self.shape, self.gold_gathering)


def packet_row(question, packet, story, gate: float | None = None, ranking: Sequence[float] = (),
               query_terms: int = 1, flagged: bool = False, gold: bool = False) -> PacketRow:
    """One question's row from the packet a pipeline served and the ranking it was judged on;
    `gold`: the judgments say its evidence gathers (lies in two or more sittings)."""
    evidence = set(question.evidence)
    covered: set[str] = set()
    shown: set[str] = set()
    useful = 0
    for item in packet.items:
        record = story.by_id[item.id]
        cites = {item.id, *record.sources}
        covered |= cites
        shown |= {item.id} if record.kind == "view" else cites
        useful += bool(cites & evidence)
    outcome = packet.outcome
    precision = useful / len(packet.items) if packet.items and evidence else None
    return PacketRow(question.qid, question.category, not evidence, outcome, _share(evidence, covered), precision,
                     packet.budget.used, len(packet.items), flagged, gate,
                     {name: f(ranking, query_terms) for name, f in PREDICTORS.items()}, _share(evidence, shown),
                     story.name, packet.gate.threshold if packet.gate is not None else None,
                     shape_of(question.text).kind, gold)


def _share(evidence: set[str], found: set[str]) -> float | None:
    return len(evidence & found) / len(evidence) if evidence else None


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def summarize(rows: Sequence[PacketRow]) -> dict:
    """The figures of one group of questions (see the module docstring)."""
    if not rows:
        return {"questions": 0}
    outcomes = [r.outcome for r in rows]
    answered = [r for r in rows if r.outcome == "answered"]
    out = {"questions": len(rows), **{d: outcomes.count(d) / len(rows) for d in DECISIONS},
           "chars": float(np.mean([r.chars for r in rows])), "items": float(np.mean([r.items for r in rows]))}
    if not rows[0].negative:
        out["evidence_covered"] = _mean(r.covered if r.outcome == "answered" else 0.0 for r in rows)
        out["evidence_covered_answered"] = _mean(r.covered for r in answered)
        out["evidence_shown"] = _mean(r.shown if r.outcome == "answered" else 0.0 for r in rows)
        out["precision"] = _mean(r.precision for r in answered)
    return out


def losses(rows: Sequence[PacketRow]) -> list[float]:
    """What answering each question costs, for risk-coverage: 1 for a negative (whatever is
    packed for it answers something nobody asked of this store), 0 for an answerable one.
    Risk is then the share of answered questions that nothing in the store answers; how
    much of an answer the packet holds is the coverage figures' business, not the gate's."""
    return [1.0 if r.negative else 0.0 for r in rows]


@dataclass
class DecisionReport:
    """Per pipeline: the packet and decision figures, overall, by category and by shape
    (the gold gathering row beside the shape rule's), and the AUROC of its gate beside the
    predictors'."""
    groups: dict[str, dict[str, dict]]                 # pipeline -> group -> figures
    by_category: dict[str, dict[str, dict[str, dict]]]  # pipeline -> group -> category -> figures
    auroc: dict[str, dict[str, float | None]]          # pipeline -> "gate" | predictor -> AUROC
    operating: dict[str, tuple[float, float]]          # pipeline -> (coverage, risk)
    curves: dict[str, list]                            # "pipeline gate" -> risk-coverage points
    premise_flagged: dict[str, dict[str, float]]       # pipeline -> category -> share flagged
    thresholds: dict[str, dict[str, float]] = field(default_factory=dict)   # pipeline -> store -> its threshold
    by_shape: dict[str, dict[str, dict[str, dict]]] = field(default_factory=dict)  # pipeline -> group -> row -> figures

    def to_json(self) -> dict:
        return {"groups": self.groups, "by_category": self.by_category, "by_shape": self.by_shape,
                "auroc": self.auroc,
                "operating_point": {p: {"coverage": c, "risk": r} for p, (c, r) in self.operating.items()},
                "premise_flagged": self.premise_flagged, "thresholds": self.thresholds}


def _grouped(rows: Sequence[PacketRow], labels_of, order: Sequence[str]) -> dict[str, dict]:
    """Label -> the figures of the rows carrying it (`labels_of(row)` names a row's labels),
    in `order`; a label no row carries is left out."""
    return {label: summarize(chosen) for label in order
            if (chosen := [r for r in rows if label in labels_of(r)])}


def decision_report(rows: Mapping[str, Sequence[PacketRow]]) -> DecisionReport:
    groups, by_category, aurocs, operating, curves, flagged, thresholds = {}, {}, {}, {}, {}, {}, {}
    by_shape = {}
    for name, pipeline_rows in rows.items():
        # a store answers at one threshold (a question's own settings aside): the first seen stands for it
        stores = {}
        for r in pipeline_rows:
            if r.threshold is not None:
                stores.setdefault(r.store, r.threshold)
        if stores:
            thresholds[name] = dict(sorted(stores.items()))
        split = {ANSWERABLE: [r for r in pipeline_rows if not r.negative],
                 NEGATIVE: [r for r in pipeline_rows if r.negative]}
        groups[name] = {g: summarize(rs) for g, rs in split.items() if rs}
        by_category[name] = {g: _grouped(rs, lambda r: (r.category,), sorted({r.category for r in rs}))
                             for g, rs in split.items() if rs}
        by_shape[name] = {g: _grouped(rs, lambda r: r.shape_rows, SHAPE_ROWS) for g, rs in split.items() if rs}
        pos, neg = split[ANSWERABLE], split[NEGATIVE]
        gated = all(r.gate is not None for r in pipeline_rows)
        aurocs[name] = {"gate": auroc([r.gate for r in pos], [r.gate for r in neg]) if gated else None,
                        **{p: auroc([r.predictors[p] for r in pos], [r.predictors[p] for r in neg])
                           for p in PREDICTORS}}
        loss = losses(pipeline_rows)
        operating[name] = operating_point([r.outcome == "answered" for r in pipeline_rows], loss)
        if gated:  # the gate's curve, beside the plainest predictor's from the same ranking
            curves[f"{name} gate"] = risk_coverage([r.gate for r in pipeline_rows], loss)
            curves[f"{name} top score"] = risk_coverage([r.predictors["top"] for r in pipeline_rows], loss)
        flagged[name] = {cat: float(np.mean([r.flagged for r in pos if r.category == cat]))
                         for cat in sorted({r.category for r in pos})}
    return DecisionReport(groups, by_category, aurocs, operating, curves, flagged, thresholds, by_shape)


def _cell(value, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def packet_tables(report: DecisionReport, budget: int, ms_per_query: Mapping[str, float] | None = None,
                  negatives: Mapping | None = None) -> list:
    """The packet table (answerable questions, then negatives) and the decision table (the
    gate's AUROC beside the predictors', and the operating point)."""
    from rich.table import Table

    ms_per_query = ms_per_query or {}
    out = []
    table = Table(title=f"The packet at {budget} characters: answerable questions"
                        + (f" and {negatives['kind']} negatives" if negatives else ""))
    for col in ("pipeline", "questions", *DECISIONS, "evidence covered", "covered when answered",
                "shown, not by a view", "precision", "chars", "items", "ms/query"):
        table.add_column(col, justify="left" if col in ("pipeline", "questions") else "right")
    for name, groups in report.groups.items():
        for group, g in groups.items():
            table.add_row(name if group == ANSWERABLE else "", f"{group} ({g['questions']})",
                          *(_cell(g.get(d)) for d in DECISIONS), _cell(g.get("evidence_covered")),
                          _cell(g.get("evidence_covered_answered")), _cell(g.get("evidence_shown")),
                          _cell(g.get("precision")),
                          f"{g['chars']:.0f}", f"{g['items']:.1f}",
                          f"{ms_per_query.get(name, 0):.1f}" if group == ANSWERABLE else "")
    out.append(table)
    categories = sorted({c for groups in report.by_category.values() for g in groups.values() for c in g})
    if len(categories) > 1:
        out.append(grouped_table(report.by_category, "category", categories))
    if report.by_shape:
        out.append(grouped_table(report.by_shape, "shape", SHAPE_ROWS))
    if any(v is not None for a in report.auroc.values() for v in a.values()):
        names = list(PREDICTORS)
        table = Table(title="Answer or stay silent: AUROC, answerable against negatives (the gate's score, "
                            "and predictors from the same ranking); operating point (coverage, risk)")
        for col in ("pipeline", "gate", *names, "coverage", "risk", "threshold per store"):
            table.add_column(col, justify="left" if col == "pipeline" else "right")
        for name, values in report.auroc.items():
            coverage, risk = report.operating[name]
            table.add_row(name, _cell(values["gate"]) or "no gate", *(_cell(values[p]) for p in names),
                          f"{coverage:.3f}", f"{risk:.3f}", _thresholds(report.thresholds.get(name)))
        out.append(table)
    return out


GROUPED_FIGURES = "answered, evidence covered (when answered) on answerable questions; answered on negatives"


def grouped_table(by: Mapping[str, Mapping[str, Mapping[str, dict]]], what: str, labels: Sequence[str]):
    """The packet by `what` (category or shape): a row per label, a column per pipeline
    (`by`: pipeline -> group -> label -> figures), each cell the answerable questions'
    answered share and evidence covered (when answered), then the negatives' answered."""
    from rich.table import Table

    shown = [label for label in labels if any(label in g for groups in by.values() for g in groups.values())]
    table = Table(title=f"By {what}: {GROUPED_FIGURES}", caption_justify="left")
    table.add_column(what)
    for name in by:
        table.add_column(name, justify="right")
    for label in shown:
        cells = []
        for groups in by.values():
            own, neg = groups.get(ANSWERABLE, {}).get(label), groups.get(NEGATIVE, {}).get(label)
            cell = (f"{own['answered']:.3f}, {own['evidence_covered']:.3f} "
                    f"({_cell(own['evidence_covered_answered']) or '-'})" if own else "")
            cells.append(cell + (f"; {neg['answered']:.3f}" if neg else ""))
        table.add_row(_counted(label, next(iter(by.values()))) if what == "shape" else label, *cells)
    if what == "shape":
        table.caption = f"{SHAPE_CAPTION}; {GOLD}: evidence in two or more sittings, read from the judgments"
    return table


def _counted(label: str, groups: Mapping[str, Mapping[str, dict]]) -> str:
    """A shape's label with its answerable questions and negatives counted (the same for
    every pipeline: each is asked every question)."""
    own, neg = groups.get(ANSWERABLE, {}).get(label), groups.get(NEGATIVE, {}).get(label)
    counts = [f"{own['questions']}" if own else "0"] + ([f"{neg['questions']} negatives"] if neg else [])
    return f"{label} ({', '.join(counts)})"


def _thresholds(stores: Mapping[str, float] | None) -> str:
    """The support each store answers at: one store's, or the median and range over several."""
    if not stores:
        return ""
    values = sorted(stores.values())
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{float(np.median(values)):.2f} ({values[0]:.2f} to {values[-1]:.2f}, {len(values)} stores)"


def plot_decisions(report: DecisionReport, path, title: str = "") -> str:
    """The risk-coverage PNG: each gate's curve and every pipeline's operating point."""
    from garden.evaluation.abstention import plot_risk_coverage

    return str(plot_risk_coverage(report.curves, report.operating, path, title))
