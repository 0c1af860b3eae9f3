"""Sweep the standout ratio over every case: what each value keeps, lets through, and packs.

For each standout value from 1.0 to 3.0, every retrieving query of every case (the case
and its controls, under `default`, each with that standout in place of its own) is run and
scored on its own expectations:

- kept: expected items (lead, include, sequence) that made the packet, of all expected;
- forbidden: excluded items that made the packet anyway;
- silent kept: queries expected to be silent (max_items 0, or unanswerable) that stayed silent;
- items per packet: the mean packet length.

It prints a table and writes a PNG. docs/figures.md quotes the table and explains the default.
`--setting answer_at --values -2,-1,0,0.45,1` sweeps the decide stage's threshold the same
way, and `--pipeline default-decide-fill` the rule as it was before that stage.

    .venv/bin/python experiments/standout_sweep.py [PATH...] [--out experiments/out]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from garden.formats.cases import load_case, spec_for
from garden.pipelines import make_pipeline
from garden.evaluation.runner import collect_case_files
from garden.formats.stories import load_story

VALUES = [round(1.0 + 0.1 * i, 1) for i in range(21)]


def queries(paths):
    out = []
    for path in collect_case_files(paths):
        loaded = load_case(path)
        for q in loaded.queries:
            if q.expect.build_error or q.expect.decision in ("skip", "ask"):
                continue
            out.append((loaded.id, q, spec_for(q, load_story(q.story_path))))
    return out


def sweep(paths, values=VALUES, setting: str = "standout", pipeline_name: str = "default"):
    pipeline = make_pipeline(pipeline_name)
    rows = []
    work = queries(paths)
    for value in values:
        kept = expected = forbidden = silent_ok = silent_total = 0
        sizes = []
        for _, q, spec in work:
            spec.settings = spec.settings.merged(type(spec.settings)(**{setting: value}))
            ids = pipeline.run(spec).packet.ids()
            want = {*q.expect.include, *q.expect.sequence} | ({q.expect.lead} if q.expect.lead else set())
            expected += len(want)
            kept += len(want & set(ids))
            forbidden += len(set(q.expect.exclude) & set(ids))
            if q.expect.max_items == 0 or q.expect.unanswerable:
                silent_total += 1
                silent_ok += not ids
            sizes.append(len(ids))
        rows.append({"setting": setting, "pipeline": pipeline_name, "value": value, "kept": kept, "expected": expected,
                     "forbidden": forbidden,
                     "silent_kept": silent_ok, "silent_total": silent_total,
                     "items_per_packet": float(np.mean(sizes)) if sizes else 0.0, "queries": len(work)})
    return rows


def print_table(rows) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{rows[0]['setting']} sweep under {rows[0]['pipeline']} ({rows[0]['queries']} retrieving "
                        "queries)")
    for col in (rows[0]["setting"], "expected kept", "forbidden through", "silent kept", "items/packet"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(f"{r['value']:g}", f"{r['kept']}/{r['expected']}", str(r["forbidden"]),
                      f"{r['silent_kept']}/{r['silent_total']}", f"{r['items_per_packet']:.2f}")
    Console(width=120).print(table)


def plot(rows, path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    x = [r["value"] for r in rows]
    figure = Figure(figsize=(8, 4.5))
    FigureCanvasAgg(figure)
    ax = figure.add_subplot(1, 1, 1)
    ax.plot(x, [r["kept"] / max(1, r["expected"]) for r in rows], marker="o", label="expected items kept (share)")
    ax.plot(x, [r["silent_kept"] / max(1, r["silent_total"]) for r in rows], marker="s",
            label="silent queries kept silent (share)")
    ax2 = ax.twinx()
    ax2.plot(x, [r["items_per_packet"] for r in rows], color="tab:gray", linestyle="--", label="items per packet")
    ax2.plot(x, [r["forbidden"] for r in rows], color="tab:red", linestyle=":", label="forbidden items through")
    ax.set_xlabel(rows[0]["setting"])
    ax.set_ylabel("share")
    ax.set_ylim(0, 1.05)
    ax2.set_ylabel("count")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="lower left", fontsize=8)
    ax.set_title(f"{rows[0]['setting']} sweep over every case ({rows[0]['pipeline']})")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="case files or folders (default regression/ and challenge/)")
    parser.add_argument("--out", default="experiments/out", help="folder for the PNG")
    parser.add_argument("--setting", default="standout", help="the setting to sweep (default standout)")
    parser.add_argument("--values", help="comma-separated values (default 1.0 to 3.0 by 0.1)")
    parser.add_argument("--pipeline", default="default", help="a structured pipeline (default: default)")
    args = parser.parse_args(argv)
    values = [float(v) for v in args.values.split(",")] if args.values else VALUES
    rows = sweep(args.paths or None, values, args.setting, args.pipeline)
    print_table(rows)
    name = "standout_sweep.png" if args.setting == "standout" else f"{args.setting}_sweep.png"
    print(f"wrote {plot(rows, Path(args.out) / name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
