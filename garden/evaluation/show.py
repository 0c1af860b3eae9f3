"""Showing a comparison: the table of a report and the per-query plot. Nothing here
computes a figure; it draws what measures.py computed."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np

from garden.errors import GardenError
from garden.evaluation.measures import TIE, natural_key, win_tie_loss


def compare_table(report):
    """A rich Table of a CompareReport: one row per pipeline, a mark on each significant
    difference."""
    from rich.table import Table

    table = Table(title=f"{report.collection}: {len(report.evaluation.qids)} graded questions, baseline "
                        f"{report.baseline}")
    table.add_column("pipeline")
    for metric in report.measures:
        table.add_column(metric, justify="right")
    first = report.measures[0]
    table.add_column(f"W/T/L {first}", justify="right")
    table.add_column("queries/s", justify="right")
    for name, values in report.evaluation.aggregates.items():
        cells = []
        for metric in report.measures:
            test = report.tests.get(name, {}).get(metric)
            mark = ""  # joined to its figure: a narrow terminal never wraps a mark away from it
            if test is not None and test.significant:
                mark = "▲" if test.delta > 0 else "▼"
            cells.append(f"{values[metric]:.4f}{mark}")
        test = report.tests.get(name, {}).get(first)
        wtl = f"{test.wins}/{test.ties}/{test.losses}" if test else "baseline"
        speed = report.queries_per_s.get(name)
        cells += [wtl, f"{speed:,.0f}" if speed is not None else "-"]
        table.add_row(name, *cells)
    correction = ", Holm-adjusted" if report.correction == "holm" else ""
    table.caption = f"▲/▼ p < {report.alpha} vs {report.baseline} (paired randomization{correction})"
    return table

def plot_per_query(path: str | Path, per_query: Mapping[str, Mapping[str, Mapping[str, float]]],
                   baseline: str, metric: str) -> Path:
    """A PNG with one panel per pipeline: its per-query `metric` minus the baseline's,
    sorted from largest gain to largest loss. `per_query` is pipeline -> metric -> qid ->
    value, as in `Evaluation.per_query`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if baseline not in per_query:
        raise GardenError(f"baseline {baseline!r} is not among the pipelines: {', '.join(per_query)}")
    if metric not in per_query[baseline]:
        raise GardenError(f"metric {metric!r} was not computed; have {', '.join(per_query[baseline])}")
    others = [p for p in per_query if p != baseline]
    base = per_query[baseline][metric]
    qids = sorted(base, key=natural_key)
    figure = Figure(figsize=(8, 2.4 * max(1, len(others)) + 0.6))
    FigureCanvasAgg(figure)
    axes = figure.subplots(max(1, len(others)), 1, squeeze=False)[:, 0]
    for ax, name in zip(axes, others or [baseline]):
        diffs = np.sort([per_query[name][metric][q] - base[q] for q in qids])[::-1]
        wins, _, losses = win_tie_loss(diffs, np.zeros_like(diffs))
        colors = ["tab:green" if d > TIE else "tab:red" if d < -TIE else "tab:gray" for d in diffs]
        ax.bar(range(len(diffs)), diffs, color=colors, width=1.0)
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_title(f"{name} - {baseline}: {metric} per query ({wins} better, {losses} worse)", fontsize=9)
        ax.set_ylabel(f"Δ {metric}")
        ax.set_xticks([])
    axes[-1].set_xlabel("queries, sorted by difference")
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=100)
    return path
