"""Human tables (rich) for the command line; each ends with a summary line."""
from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from garden._table_rows import print_table
from garden.store.layout import CHALLENGE, REGRESSION
from garden.models import Packet
from garden.evaluation.runner import ContrastReport, RunReport

console = Console(soft_wrap=False, width=160)


def safe(text) -> str:
    """Stored text made safe for a rich table or line: control characters (escape
    sequences) shown as text, not sent to the terminal, and `[` kept from reading as
    markup. Stories, traces and cases are files anyone may have written."""
    from rich.markup import escape

    from garden.text import one_line

    return escape(one_line(str(text), 100_000))


def show_packet(packet: Packet, pipeline: str) -> None:
    console.print(f"[bold]{packet.decision.upper()}[/bold]  {safe(packet.reason)}")
    for w in packet.warnings:
        console.print(f"[yellow]warning:[/yellow] {safe(w)}")
    table = Table(title=f"packet ({pipeline})", show_lines=False)
    for col in ("#", "id", "date", "kind", "fidelity", "labels", "score", "why"):
        table.add_column(col, overflow="fold")
    # print_table: the same text as add_row and print, at a cost that is the rows' text
    rows = [(str(n), item.id, str(item.at or ""), item.kind, item.fidelity, ", ".join(item.labels),
             f"{item.score:.3f}", safe("; ".join(item.why))) for n, item in enumerate(packet.items, 1)]
    if packet.items:
        print_table(console, table, rows)
    if packet.rejected:
        rej = Table(title="rejected")
        for col in ("id", "reason", "detail"):
            rej.add_column(col, overflow="fold")
        print_table(console, rej, [(r.id, r.reason, safe(r.detail or "")) for r in packet.rejected])
    console.print(f"{len(packet.items)} items, {len(packet.rejected)} rejected, "
                  f"budget {packet.budget.used}/{packet.budget.limit} characters")


def show_run(report: RunReport) -> None:
    table = Table(title="cases")
    for col in ("suite", "case", "pipeline", "result", "controls", "failures"):
        table.add_column(col, overflow="fold")
    for r in report.results:
        fails = [safe(f) for f in r.main.failures] + [safe(f"[{c.name}] {f}") for c in r.controls for f in c.failures]
        status = "[green]pass[/green]" if r.passed else (
            "[red]FAIL[/red]" if r.suite == REGRESSION else "[yellow]known miss[/yellow]")
        table.add_row(r.suite, r.case, r.pipeline, status,
                      f"{sum(c.passed for c in r.controls)}/{len(r.controls)}" if r.controls else "none",
                      "\n".join(fails))
    console.print(table)
    ledger = [r for r in report.results if r.suite == CHALLENGE and not r.passed]
    if ledger:
        console.print(f"challenge ledger: {len(ledger)} known miss(es), reported, not failing the run")
    console.print(f"triage fell back to its default on {report.fallbacks} of {report.queries} queries")
    console.print(f"{report.passed} passed, {report.failed} failed "
                  f"({report.regression_failed} regression failures)")


def contrast_cell(result) -> str:
    """One cell of the matrix: the main query and the controls apart, no 0/0."""
    main = "[green]✓ main[/green]" if result.main.passed else "[red]✗ main[/red]"
    if not result.controls:
        return main
    passed = sum(x.passed for x in result.controls)
    colour = "green" if passed == len(result.controls) else "red"
    return f"{main} · [{colour}]{passed}/{len(result.controls)} controls[/{colour}]"


def show_contrast(report: ContrastReport) -> None:
    # as wide as the terminal; written to a file or a pipe, as wide as the table needs (a
    # table takes its natural width, so this bounds nothing real): no cell folds, however
    # many retrievers are registered
    wide = Console(soft_wrap=False, width=None if sys.stdout.isatty() else 2000)
    table = Table(title="contrast: each case under each pipeline (main query, then its controls)")
    table.add_column("case", overflow="fold")
    table.add_column("suite")
    for p in report.pipelines:
        table.add_column(p, justify="center", overflow="fold")
    table.add_column("contrast?", overflow="fold")
    for c in report.cases:
        row = [c.id, c.suite, *(contrast_cell(report.cells[(c.id, p)]) for p in report.pipelines)]
        failing = report.baselines_failing(c.id)
        if report.is_contrast(c.id):
            row.append(f"yes ({', '.join(failing)})")
        elif failing:
            row.append("[yellow]no: default fails it too[/yellow]")
        else:
            row.append("[yellow]no: every baseline passes[/yellow]")
        table.add_row(*row)
    wide.print(table)
    for name, why in report.unavailable.items():
        wide.print(f"[yellow]baseline {name} unavailable:[/yellow] {why}")
    data = report.to_json()["summary"]
    wide.print(f"{data['cases']} cases: default passes {data['default_passed']}; "
               f"{data['contrasts']} are contrasts (default passes, a baseline fails); "
               f"{data['default_failed_too']} fail under default too; "
               f"{data['cases'] - data['contrasts'] - data['default_failed_too']} pass under every baseline")
