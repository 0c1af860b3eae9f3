"""A rich table printed in time that grows with its text, not with a layout per cell.

rich lays out a table cell by cell: every cell is parsed for markup and emoji codes,
highlighted, measured, then padded, wrapped and cut into lines on its own, a few hundred
microseconds a cell. A packet whose rejected list runs to thousands of rows (a topic that
every record of a large store carries) took seconds to print.

Most rows are plain: each cell holds no markup, no emoji code and no line break, and fits
its column on one line. With no line between rows (`show_lines` off), such a row prints as
the column's box characters around each cell's text, padded with spaces to the column's
width. `print_table` prints a table so: rich lays out the table with each run of plain
rows standing in as one row of marker cells that measure as the run's cells do (the widest
text and the longest word of a column are the same in one cell or in many), every other row
laid out by rich as before; each marker line is then replaced by the run's rows, written on
the marker line's pattern. The characters are rich's own, row for row
(`tests/test_table_rows.py` holds them to rich's output, table by table).

Styles are where this stops: rich highlights numbers and names in a cell in a terminal,
and that costs the per-cell work this avoids. So a console that writes styles (a terminal)
gets rich's own layout, whole, and the fast path is for output without styles (a pipe, a
file, `NO_COLOR`), which is what a script or a benchmark reads.
"""
from __future__ import annotations

import re
from copy import copy as copy_of
from dataclasses import replace
from typing import Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table

MARKS = "\ue000\ue001\ue002\ue003\ue004\ue005\ue006\ue007\ue008\ue009\ue00a\ue00b"  # private use: never in a cell
# markup, what could be an emoji code (rich's pattern: two colons, no space between), a marker
NOT_PLAIN = re.compile(r"\[|:\S*:|[\ue000-\ue00b]")


def print_table(console: Console, table: Table, rows: Sequence[Sequence[str]]) -> None:
    """Print `table` (its columns made, no rows yet) on `console` with `rows` (each a
    sequence of markup strings, one a column), exactly as adding the rows to it and
    printing it would."""
    probe = _empty_copy(table)
    if console.color_system is not None or probe.show_lines or len(probe.columns) > len(MARKS) or console.record:
        for row in rows:
            probe.add_row(*row)
        console.print(probe)
        return
    columns = len(probe.columns)
    plain = [len(row) == columns and all(_plain(c) for c in row) for row in rows]
    text, runs = _laid_out(console, probe, rows, plain)
    room = _room(text)
    if room is not None:   # a plain row wider than its column would wrap: rich lays it out
        fits = [ok and all(cell_len(c) <= r for c, r in zip(row, room)) for ok, row in zip(plain, rows)]
        if fits != plain:
            text, runs = _laid_out(console, _empty_copy(table), rows, fits)
    if console.quiet:
        return
    pending = iter(runs)
    out: list[str] = []
    for line in text.split("\n"):
        if MARKS[0] in line:
            out.extend(_fill(line, next(pending)))
        else:
            out.append(line)
    console.file.write("\n".join(out))
    console.file.flush()


def _empty_copy(table: Table) -> Table:
    """`table` with its columns and no rows: each layout adds rows to its own copy."""
    copy = copy_of(table)
    copy.columns = [replace(c, _cells=[]) for c in table.columns]
    copy.rows = []
    return copy


def _laid_out(console: Console, table: Table, rows, plain: list[bool]) -> tuple[str, list[list[Sequence[str]]]]:
    """rich's text of `table` with `rows`, each run of plain rows one marker row; the runs."""
    runs: list[list[Sequence[str]]] = []
    run: list[Sequence[str]] = []
    for row, ok in zip(rows, plain):
        if ok:
            run.append(row)
            continue
        if run:
            table.add_row(*_Marker.row(run, len(table.columns)))
            runs.append(run)
            run = []
        table.add_row(*row)
    if run:
        table.add_row(*_Marker.row(run, len(table.columns)))
        runs.append(run)
    with console.capture() as captured:
        console.print(table)
    return captured.get(), runs


def _room(text: str) -> list[int] | None:
    """Each column's width for text, read off the first marker line (None: no marker)."""
    for line in text.split("\n"):
        if MARKS[0] in line:
            return [len(m) for m in re.findall(f"[{MARKS}]+", line)]
    return None


def _plain(cell: str) -> bool:
    """A cell rich prints as its text: printable (no line break, tab or control character
    for rich to act on), no markup or emoji code, and not blank unless empty (a blank cell
    measures by its width, one with a word by its longest word)."""
    return cell == "" or (cell.isprintable() and bool(cell.split()) and not NOT_PLAIN.search(cell))


def _fill(line: str, run: list[Sequence[str]]) -> list[str]:
    """The run's rows on the marker line's pattern: each marker stretch is one column's text,
    padded with spaces to the stretch's width (`print_table` sends only cells that fit)."""
    pieces = re.split(f"([{MARKS}]+)", line)
    out = []
    for row in run:
        column = 0
        text = []
        for piece in pieces:
            if piece and piece[0] in MARKS:
                cell = row[column]
                text.append(cell + " " * (len(piece) - cell_len(cell)))
                column += 1
            else:
                text.append(piece)
        out.append("".join(text))
    return out


class _Marker:
    """One column of a run of plain rows, as rich sees it: measured as the run's cells
    are, printed as one line of this column's marker across the width rich gives it."""

    def __init__(self, mark: str, cells: list[str]):
        self.mark = mark
        widths = [cell_len(c) for c in cells]
        words = [cell_len(w) for c in cells for w in c.split()]
        self.maximum = max(widths, default=0)
        self.minimum = max(words, default=0)

    @classmethod
    def row(cls, run: list[Sequence[str]], columns: int) -> list[_Marker]:
        return [cls(MARKS[n], [row[n] for row in run]) for n in range(columns)]

    def __rich_measure__(self, console, options) -> Measurement:
        return Measurement(self.minimum, self.maximum)

    def __rich_console__(self, console, options):
        # the width rich gives the column's text: what `_room` reads
        yield Segment(self.mark * options.max_width)
