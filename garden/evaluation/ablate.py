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
from garden.evaluation.replay import compare_source, is_collection
from garden.evaluation.runner import load_cases, run_case
from garden.pipelines import STRUCTURED, check_pipeline


@dataclass
class Ablation:
    full: str
    variants: dict[str, str]                       # stage -> pipeline name without it
    comparison: object                             # the SourceReport of full vs every variant
    decides: dict[str, list[str]] = field(default_factory=dict)   # stage -> cases it makes pass
    hurts: dict[str, list[str]] = field(default_factory=dict)     # stage -> cases it makes fail
    cases: int = 0

    def to_json(self) -> dict:
        report = self.comparison.report
        tests = report.tests
        rows = {}
        for stage, name in self.variants.items():
            by_metric = tests.get(name, {})
            rows[stage] = {"pipeline": name, "decides": self.decides.get(stage, []), "hurts": self.hurts.get(stage, []),
                           "metrics": {m: {"without": t.mean, "with": t.baseline_mean, "delta": t.baseline_mean - t.mean,
                                           "p_adjusted": t.p_adjusted, "significant": t.significant}
                                       for m, t in by_metric.items()}}
        return {"full": self.full, "source": report.collection, "queries": len(report.evaluation.qids),
                "cases": self.cases, "measures": report.measures,
                "judgments": "each case's expectations" if self.cases else "the collection's qrels",
                "test": "paired randomization, Holm-adjusted, full pipeline as the baseline",
                "stages": rows}

    def show(self) -> None:
        from rich.console import Console
        from rich.table import Table

        data = self.to_json()
        measures = data["measures"]
        table = Table(title=f"what each stage of {self.full} is worth on {data['source']} "
                            f"({data['queries']} queries, judged by {data['judgments']})")
        table.add_column("stage removed")
        if self.cases:
            table.add_column("cases it decides")
        for m in measures:
            table.add_column(f"Δ{m}", justify="right")
        for stage, row in data["stages"].items():
            cells = []
            if self.cases:
                cells.append(", ".join(row["decides"] + [f"-{c}" for c in row["hurts"]]) or "-")
            for m in measures:
                metric = row["metrics"].get(m)
                mark = " *" if metric and metric["significant"] else ""
                cells.append(f"{metric['delta']:+.4f}{mark}" if metric else "-")
            table.add_row(stage, *cells)
        table.caption = ("Δ = full pipeline minus the pipeline without the stage; * p < 0.05 after Holm; "
                         "a case prefixed - passes only without the stage")
        Console(width=160).print(table)


def ablate(source: str, full: str = "default", stages: list[str] | None = None, metrics: str | None = None) -> Ablation:
    """Run `full` and each one-stage-removed variant on `source` (case files or folders, a
    trace, or a collection) and report what each stage decides."""
    from garden.pipelines.structured import STAGES

    if full not in STRUCTURED:
        raise GardenError(f"ablate: {full!r} is not a structured pipeline ({', '.join(STRUCTURED)})")
    removable = [s.name for s in STAGES if not s.essential]
    chosen = stages or removable
    variants = {s: check_pipeline(f"{full}-{s}") for s in chosen}
    path = Path(source)
    ablation = Ablation(full, variants, None)
    if path.exists() and not is_collection(path) and path.suffix != ".jsonl":
        cases = load_cases([source])
        ablation.cases = len(cases)
        for case in cases:
            with_stage = run_case(case, full, trace=False).passed
            for stage, name in variants.items():
                without = run_case(case, name, trace=False).passed
                if with_stage and not without:
                    ablation.decides.setdefault(stage, []).append(case.id)
                elif without and not with_stage:
                    ablation.hurts.setdefault(stage, []).append(case.id)
    ablation.comparison = compare_source(source, [full, *variants.values()], baseline=full, metrics=metrics)
    if ablation.comparison.report is None:
        raise GardenError(f"{source}: no question has judgments (a case's expectations or a collection's "
                          "qrels), so no stage's worth can be measured")
    return ablation
