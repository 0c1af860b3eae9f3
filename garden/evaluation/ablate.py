"""Ablation: what is each stage of the structured pipeline worth?

The full pipeline and each one-stage-removed variant (`default-phrase`, ...) run on the same
source. On cases, a stage *decides* a case when the case's verdict under the full pipeline
differs from its verdict without the stage (it passes only with the stage, or, a stage
that hurts, only without it). On every source the variants are compared with the full
pipeline, as the baseline, on the source's judgments (a case's expectations, a
collection's qrels), with the paired randomization test and Holm's correction.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from garden.errors import GardenError
from garden.evaluation.packets import grouped_table
from garden.evaluation.shapes import ROWS as SHAPE_ROWS, ShapeBreakdown
from garden.pipelines import STRUCTURED, check_pipeline, split_structured
from garden.pipelines.variants import without_stage


@dataclass
class Ablation:
    full: str
    variants: dict[str, str]                       # stage -> pipeline name without it
    comparison: object                             # the CompareReport of full vs every variant
    decides: dict[str, list[str]] = field(default_factory=dict)   # stage -> cases it makes pass
    hurts: dict[str, list[str]] = field(default_factory=dict)     # stage -> cases it makes fail
    cases: int = 0
    judged_by: str | None = None                   # when neither cases nor a collection's qrels judge
    packets: dict[str, dict] = field(default_factory=dict)        # pipeline -> what the user gets (LoCoMo)
    shapes: ShapeBreakdown | None = None           # the comparison by the question's shape
    packets_by_shape: dict[str, dict] = field(default_factory=dict)  # pipeline -> group -> shape row -> figures

    def to_json(self) -> dict:
        report = self.comparison
        rows = {}
        for stage, name in self.variants.items():
            rows[stage] = {"pipeline": name, "decides": self.decides.get(stage, []), "hurts": self.hurts.get(stage, []),
                           "metrics": _deltas(report, name)}
            if self.shapes is not None:
                rows[stage]["by_shape"] = {row: _deltas(rep, name) for row, rep in self.shapes.reports.items()}
        data = {"full": self.full, "source": report.collection, "queries": len(report.evaluation.qids),
                "cases": self.cases, "measures": report.measures,
                "judgments": self.judged_by or ("each case's expectations" if self.cases else "the collection's qrels"),
                "test": "paired randomization, Holm-adjusted, full pipeline as the baseline",
                "stages": rows, "packet": self.packets or None}
        if self.shapes is not None:
            # the rows' questions and the rule's agreement with the gold; each stage's Δ under it, above
            data["by_shape"] = {k: v for k, v in self.shapes.to_json().items() if k != "figures"}
            data["packet_by_shape"] = self.packets_by_shape or None
        return data

    def show(self) -> None:
        from rich.table import Table

        from garden._terminal import echo, print_table

        data = self.to_json()
        measures = data["measures"]
        table = Table(title=f"what each stage of {self.full} is worth on {data['source']} "
                            f"({data['queries']} queries, judged by {data['judgments']})")
        table.add_column("stage removed")
        for m in measures:
            table.add_column(f"Δ{m}", justify="right")
        for stage, row in data["stages"].items():
            table.add_row(stage, *(_delta_cell(row["metrics"].get(m)) for m in measures))
        table.caption = "Δ = full pipeline minus the pipeline without the stage; * p < 0.05 after Holm"
        print_table(table)
        if self.shapes is not None:
            print_table(self._shape_table(data))
        if self.cases:
            # the cases each stage decides, a line per stage: ids are too long for a column
            echo([f"{stage} decides: {', '.join(row['decides']) or 'no case'}"
                  + (f"; passes only without it: {', '.join(row['hurts'])}" if row["hurts"] else "")
                  for stage, row in data["stages"].items()])
        if self.packets:
            table = Table(title="what the user gets without each stage (answerable questions, and negatives)")
            for col in ("pipeline", *PACKET_FIGURES):
                table.add_column(col, justify="left" if col == "pipeline" else "right")
            for name, groups in self.packets.items():
                row = _packet_figures(groups)
                table.add_row(name, *("" if row[k] is None else f"{row[k]:.3f}" for k in PACKET_FIGURES))
            print_table(table)
        if self.packets_by_shape:
            print_table(grouped_table(self.packets_by_shape, "shape", SHAPE_ROWS))

    def _shape_table(self, data: dict):
        """Each stage's Δ within each shape's questions (the gold gathering row beside the rule's)."""
        from rich.table import Table

        measures = data["measures"]
        table = Table(title=f"what each stage of {self.full} is worth by shape", caption_justify="left")
        table.add_column("stage removed: shape")
        for m in measures:
            table.add_column(f"Δ{m}", justify="right")
        for stage, row in data["stages"].items():
            for shape, metrics in row["by_shape"].items():
                table.add_row(f"{stage}: {self.shapes.label(shape)}", *(_delta_cell(metrics.get(m)) for m in measures))
        table.caption = f"Δ and * as above, within each row's questions; {self.shapes.caption()}"
        return table


def _deltas(report, variant: str) -> dict[str, dict]:
    """measure -> what the stage is worth in `report` (the full pipeline its baseline): the
    mean without it and with it, their difference and its Holm-adjusted test."""
    return {m: {"without": t.mean, "with": t.baseline_mean, "delta": t.baseline_mean - t.mean,
                "p_adjusted": t.p_adjusted, "significant": t.significant}
            for m, t in report.tests.get(variant, {}).items()}


def _delta_cell(metric: dict | None) -> str:
    return f"{metric['delta']:+.4f}{'*' if metric['significant'] else ''}" if metric else "-"


PACKET_FIGURES = ("answered", "answered (negatives)", "evidence covered", "covered when answered",
                  "shown, not by a view", "precision", "items")


def _packet_figures(groups: dict) -> dict:
    answerable, negatives = groups.get("answerable", {}), groups.get("negatives", {})
    return {"answered": answerable.get("answered"), "answered (negatives)": negatives.get("answered"),
            "evidence covered": answerable.get("evidence_covered"),
            "covered when answered": answerable.get("evidence_covered_answered"),
            "shown, not by a view": answerable.get("evidence_shown"),
            "precision": answerable.get("precision"), "items": answerable.get("items")}


def ablate(source: str, full: str = "default", stages: list[str] | None = None,
           metrics: list[str] | None = None,
           negatives: str | None = None, trace_source: str | None = None, form: str | None = None) -> Ablation:
    """Run `full` and each one-stage-removed variant on `source` (case files or folders, a
    trace, a collection, LoCoMo, LongMemEval, or any registered kind) and report what each
    stage decides. On LoCoMo and LongMemEval the measures are the evidence-turn ones (and
    any `metrics` names beside them), and beside them what the user gets (the packet and the
    decision, on LoCoMo's foreign negatives too when `negatives` names them, on
    LongMemEval's abstention questions always); `form` reads LoCoMo's chats raw or as
    messages. An option the source's kind does not take is refused naming the kind."""
    from garden.evaluation.kinds.registry import checked
    from garden.evaluation.stores import StoresReport
    from garden.pipelines.structured import STAGES

    parts = split_structured(check_pipeline(full))
    if parts is None or parts.without:
        base = next(iter(STRUCTURED))
        raise GardenError(f"ablate: {full!r} is not a structured pipeline with all its stages ({base}, "
                          f"{base}:SETTING=VALUE, or {base}@RETRIEVER on another base)")
    removable = [s.name for s in STAGES if not s.essential]
    chosen = stages or removable
    # on another base (default@dense:model=DIR) each variant stands on the same one, with
    # the settings the full pipeline's name gives that a stage left still reads
    variants = {s: check_pipeline(without_stage(full, s)) for s in chosen}
    kind, given = checked(source, {"metrics": metrics, "negatives": negatives, "trace_source": trace_source,
                                   "form": form})
    ablation = Ablation(full, variants, None)
    if kind.case_verdicts is not None:
        verdicts = kind.case_verdicts(Path(source), [full, *variants.values()])
        ablation.cases = len(verdicts)
        for case, passed in verdicts.items():
            for stage, name in variants.items():
                if passed[full] and not passed[name]:
                    ablation.decides.setdefault(stage, []).append(case)
                elif passed[name] and not passed[full]:
                    ablation.hurts.setdefault(stage, []).append(case)
    report = kind.compare(Path(source), [full, *variants.values()], full, **given)
    if isinstance(report, StoresReport):
        ablation.comparison, ablation.shapes = report.turn, report.by_shape
        ablation.judged_by = report.to_json()["judgments"]
        ablation.packets = report.packets.groups if report.packets else {}
        ablation.packets_by_shape = report.packets.by_shape if report.packets else {}
        return ablation
    ablation.comparison, ablation.shapes = report.report, report.shapes
    if ablation.comparison is None:
        raise GardenError(f"{source}: no question has judgments (a case's expectations or a collection's "
                          "qrels), so no stage's worth can be measured")
    return ablation
