"""What the command line prints for a person: the packet, a run of cases and the contrast
matrix, each fitted to the terminal's width (`garden/_terminal.py`) without a word broken
across lines, and each ending with a summary line. Stored text (stories, traces, cases are
files anyone may have written) is shown with its control characters made visible."""
from __future__ import annotations

from collections import Counter

from garden._terminal import cells, console, shorten, visible, width, wrap
from garden.evaluation.runner import CaseResult, ContrastReport, RunReport
from garden.models import Packet
from garden.rerank.candidates import CURATED_KINDS
from garden.formats.layout import CHALLENGE, REGRESSION, SUITES
from garden.text import plural

REJECTED_SHOWN = 10   # rejections listed by the packet view; every one is in --json


# --- the packet -----------------------------------------------------------------------------


def lane_of(item, structured: bool) -> str:
    """The lane an item rode in: states and decisions in the curated lane, packed first;
    everything else in the evidence lane, after it; a superseded decision rides right
    behind its successor. A bare pipeline has no lanes: one ranking by score."""
    if not structured:
        return "ranked"
    if item.superseded_by:
        return "curated, history"
    return "curated" if item.kind in CURATED_KINDS else "evidence"


def silence(packet: Packet) -> str | None:
    """Why a packet holds nothing, in one sentence (the packet's own `silent`, which HTTP
    and MCP serve too); None when it holds something."""
    if packet.items:
        return None
    if packet.decision == "ask":
        return "no packet yet: the garden asks the user first (the reason above says what)"
    return f"silent: {packet.silent[0].lower()}{packet.silent[1:]}"


def decision_lines(packet: Packet, columns: int) -> list[str]:
    """The packet's decision and reason, then each warning, at most `columns` cells a line."""
    return (wrap(f"{packet.decision.upper()}  {visible(packet.reason)}", columns)
            + [part for w in packet.warnings for part in wrap(f"warning: {visible(w)}", columns)])


def packet_lines(packet: Packet, pipeline: str, structured: bool, columns: int) -> list[str]:
    """The packet as lines of at most `columns` cells: each item's place, id, lane, kind,
    date, score and labels, its text shortened to one line, and why it was recalled."""
    lines = decision_lines(packet, columns)
    order = ("curated lane (states and decisions) first, then evidence, each best first" if structured
             else "in score order")
    head = f"packet under {pipeline}: {plural(len(packet.items), 'item')}"
    lines += wrap(head + (f", {order}" if packet.items else ""), columns)
    for n, item in enumerate(packet.items, 1):
        lines += wrap(f"{n:>2}. {visible(item.id)}  score {item.score:.3f}", columns, indent="    ")
        facts = [lane_of(item, structured), item.kind, item.fidelity, str(item.at or "undated")]
        if item.superseded_by:
            facts.append(f"behind its successor {visible(item.superseded_by)}")
        if item.labels:
            facts.append(f"labels: {', '.join(item.labels)}")
        lines += wrap("    " + " · ".join(facts), columns, indent="      ")
        lines.append("    " + shorten(item.text, columns - 4))
        for why in item.why:
            lines += wrap(f"    why: {visible(why)}", columns, indent="      ")
    reason = silence(packet)
    if reason:
        lines += wrap(reason, columns)
    if packet.rejected:
        reasons = Counter(r.reason for r in packet.rejected)
        lines += wrap(f"rejected {len(packet.rejected)}: " + ", ".join(f"{reason} {n}" for reason, n in
                                                                      reasons.most_common()), columns)
        for r in packet.rejected[:REJECTED_SHOWN]:
            lines += wrap(f"  {visible(r.id)}  {r.reason}" + (f": {visible(r.detail)}" if r.detail else ""),
                          columns, indent="      ")
        if len(packet.rejected) > REJECTED_SHOWN:
            lines.append(f"  ... and {len(packet.rejected) - REJECTED_SHOWN} more (every one in --json)")
    lines += wrap(f"{plural(len(packet.items), 'item')}, {len(packet.rejected)} rejected, budget "
                  f"{packet.budget.used}/{packet.budget.limit} characters", columns)
    return lines


def sitting_lines(packet: Packet, pipeline: str, columns: int) -> list[str]:
    """The sittings a packet lists, as lines of at most `columns` cells: each one's rank,
    number, date and title, its score, the records that carried it and why."""
    lines = decision_lines(packet, columns)
    head = f"sittings under {pipeline}: {plural(len(packet.sittings), 'sitting')}"
    lines += wrap(head + (", best first" if packet.sittings else ""), columns)
    for s in packet.sittings:
        lines += wrap(f"{s.rank:>2}. sitting {s.sitting}  score {s.score:.3f}", columns, indent="    ")
        lines += wrap("    " + " · ".join([str(s.at or "undated"), visible(s.title or "untitled")]), columns,
                      indent="      ")
        lines += wrap(f"    carried by: {', '.join(visible(rid) for rid in s.carried_by)}", columns, indent="      ")
        for why in s.why:
            lines += wrap(f"    why: {visible(why)}", columns, indent="      ")
    if not packet.sittings:
        lines += wrap(silence(packet) or "no sitting: the story keeps no turns as sittings (raw records written "
                      "one after another with the same date and title)", columns)
    lines += wrap(f"{plural(len(packet.sittings), 'sitting')} listed, {plural(len(packet.items), 'item')} in "
                  f"the packet", columns)
    return lines


def show_packet(packet: Packet, pipeline: str, level: str = "turn") -> None:
    from garden.pipelines import split_structured

    structured = split_structured(pipeline) is not None
    lines = (sitting_lines(packet, pipeline, width()) if level == "session"
             else packet_lines(packet, pipeline, structured, width()))
    for line in lines:
        print(line)


# --- a run of cases -------------------------------------------------------------------------


def _controls(r: CaseResult) -> str:
    if not r.controls:
        return "no controls"
    return f"{sum(c.passed for c in r.controls)}/{len(r.controls)} controls"


def by_suite(items: list) -> list[tuple[str, list]]:
    """`items` (each with a `.suite`) grouped by suite: the shipped suites first, in their
    order, then any other by name; a suite with nothing in it is left out."""
    suites = [*SUITES, *sorted({i.suite for i in items} - set(SUITES))]
    groups = [(suite, [i for i in items if i.suite == suite]) for suite in suites]
    return [(suite, group) for suite, group in groups if group]


def run_lines(report: RunReport, columns: int) -> list[str]:
    """Each case on one line (its result and its controls), grouped by suite, its failures
    below it; then the ledger, the triage fallbacks and the counts."""
    lines: list[str] = []
    pipelines = sorted({r.pipeline for r in report.results})
    lines += wrap(f"cases under {', '.join(pipelines)}", columns)
    name_width = max((cells(visible(r.case)) for r in report.results), default=0)
    for suite, results in by_suite(report.results):
        lines.append(suite)
        for r in results:
            status = "pass" if r.passed else ("FAIL" if r.suite == REGRESSION else "known miss")
            name = visible(r.case)
            pad = " " * max(name_width - cells(name), 0)
            lines += wrap(f"  {name}{pad}  {status:<10}  {_controls(r)}", columns)
            failures = list(r.main.failures) + [f"[{c.name}] {f}" for c in r.controls for f in c.failures]
            for failure in failures:
                lines += wrap(f"    {visible(failure)}", columns, indent="      ")
    ledger = [r for r in report.results if r.suite == CHALLENGE and not r.passed]
    if ledger:
        lines += wrap(f"challenge ledger: {plural(len(ledger), 'known miss', 'known misses')}, reported, "
                      "not failing the run", columns)
    lines += wrap(f"triage fell back to its default on {report.fallbacks} of {report.queries} queries", columns)
    lines += wrap(f"{report.passed} passed, {report.failed} failed "
                  f"({plural(report.regression_failed, 'regression failure')})", columns)
    return lines


def show_run(report: RunReport) -> None:
    for line in run_lines(report, width()):
        print(line)


# --- the contrast matrix --------------------------------------------------------------------

PASS, MAIN_FAILS, CONTROL_FAILS = "\u2713", "\u2717", "~"
LEGEND = (f"{PASS} passes; {MAIN_FAILS} its main query fails; {CONTROL_FAILS} its main query passes and a "
          "control fails; n/m: its controls that pass, when not all do")


def contrast_cell(result: CaseResult) -> str:
    """One cell of the matrix: a mark, and the controls passing when some fail."""
    if result.passed:
        return PASS
    mark = MAIN_FAILS if not result.main.passed else CONTROL_FAILS
    passed = sum(x.passed for x in result.controls)
    return mark if passed == len(result.controls) else f"{mark} {passed}/{len(result.controls)}"


def contrast_verdict(report: ContrastReport, case_id: str) -> str:
    if report.is_contrast(case_id):
        return "yes"
    return "no: default fails it too" if report.baselines_failing(case_id) else "no: every baseline passes"


def _matrix(report: ContrastReport, columns: int) -> list[str] | None:
    """The matrix as aligned lines, or None when it is wider than `columns`."""
    names = {c.id: visible(c.id) for c in report.cases}
    first = max([cells("case")] + [2 + cells(n) for n in names.values()])
    widths = {p: max(cells(p), *(cells(contrast_cell(report.cells[(c.id, p)])) for c in report.cases))
              for p in report.pipelines}
    verdict = max(cells("contrast"), 3)
    if first + sum(w + 2 for w in widths.values()) + 2 + verdict > columns:
        return None

    def row(head: str, values: list[str], last: str) -> str:
        text = head + " " * (first - cells(head))
        for p, value in zip(report.pipelines, values):
            text += "  " + value + " " * (widths[p] - cells(value))
        return (text + "  " + last).rstrip()

    lines = [row("case", list(report.pipelines), "contrast")]
    for suite, cases in by_suite(report.cases):
        lines.append(suite)
        for c in cases:
            lines.append(row("  " + names[c.id], [contrast_cell(report.cells[(c.id, p)]) for p in report.pipelines],
                             "yes" if report.is_contrast(c.id) else "no"))
    return lines


def _stacked(report: ContrastReport, columns: int) -> list[str]:
    """The matrix one case at a time, for a terminal narrower than its rows."""
    lines: list[str] = []
    for c in report.cases:
        lines += wrap(f"{visible(c.id)} ({c.suite}): contrast {'yes' if report.is_contrast(c.id) else 'no'}", columns)
        lines += wrap("  " + ", ".join(f"{p} {contrast_cell(report.cells[(c.id, p)])}" for p in report.pipelines),
                      columns)
    return lines


def contrast_lines(report: ContrastReport, columns: int, reasons: bool = False) -> list[str]:
    """The compact matrix (a mark per case and pipeline), then why each case that is no
    contrast is not one, and, with `reasons`, every failing cell's failures."""
    lines = wrap(f"contrast: {plural(len(report.cases), 'case')} under each bare retriever and default "
                 "(main query, then its controls)", columns)
    lines += wrap(LEGEND, columns)
    lines += _matrix(report, columns) or _stacked(report, columns)
    for name, why in report.unavailable.items():
        lines += wrap(f"baseline {name} unavailable: {visible(why)}", columns)
    for c in report.cases:
        if report.is_contrast(c.id):
            continue
        text = f"{visible(c.id)}: {contrast_verdict(report, c.id)}"
        failures = _failures(report.cells[(c.id, "default")])
        if failures and not reasons:
            text += f"; under default: {visible(failures[0])}" + (f" (and {len(failures) - 1} more)"
                                                                  if len(failures) > 1 else "")
        lines += wrap(text, columns)
    if reasons:
        for c in report.cases:
            for p in report.pipelines:
                for failure in _failures(report.cells[(c.id, p)]):
                    lines += wrap(f"{visible(c.id)} under {p}: {visible(failure)}", columns)
    data = report.to_json()["summary"]
    lines += wrap(f"{plural(data['cases'], 'case')}: default passes {data['default_passed']}; "
                  f"{data['contrasts']} are contrasts (default passes, a baseline fails); "
                  f"{data['default_failed_too']} fail under default too; "
                  f"{data['cases'] - data['contrasts'] - data['default_failed_too']} pass under every baseline"
                  + ("" if reasons else "; --reasons lists every failing cell's failures"), columns)
    return lines


def _failures(result: CaseResult) -> list[str]:
    return list(result.main.failures) + [f"[{c.name}] {f}" for c in result.controls for f in c.failures]


def show_contrast(report: ContrastReport, reasons: bool = False) -> None:
    out = console()
    for line in contrast_lines(report, width(), reasons):
        out.print(_coloured(line), crop=False, overflow="ignore")


def _coloured(line: str):
    """A matrix line with its marks coloured (the text itself already fits)."""
    from rich.text import Text

    text = Text(line)
    text.highlight_words([PASS], "green")
    text.highlight_words([MAIN_FAILS], "red")
    text.highlight_words([CONTROL_FAILS + " "], "yellow")
    return text

