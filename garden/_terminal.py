"""The terminal the command line writes to: its width, a console that fits it, lines
wrapped at word boundaries, and progress shown on a terminal alone.

What a person reads must fit the terminal without a word broken across lines: a terminal
wraps an over-long line wherever the column ends, mid-word. So tables are drawn at the
terminal's width (`COLUMNS` when set, else the terminal's own, else 80 when the output is a
pipe or a file), and a report's long line is wrapped at spaces, its continuation indented.
Written to a pipe or a file with no `COLUMNS`, a line naming one finding stays one line,
whole, for grep and for scripts; prose (a summary in sentences) is wrapped at 80 wherever
it goes. `--json` output never passes through here.

Progress goes to standard error: on a terminal, a count drawn in place; to a pipe or a
file, once work has run PIPE_DELAY seconds, one plain line every PIPE_EVERY seconds, so a
long run written to a log says it is still working. Standard output never carries it.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
import threading
import time

DEFAULT_WIDTH = 80     # a pipe or a file, when COLUMNS names none
MIN_WIDTH = 40         # narrower than this, nothing reads; the garden draws at 40 and lets it wrap
MAX_WIDTH = 400
INDENT = "  "          # a wrapped line's continuation


def _columns() -> int | None:
    text = os.environ.get("COLUMNS", "")
    if text.isascii() and text.isdigit():
        return min(max(int(text), MIN_WIDTH), MAX_WIDTH)
    return None


def width() -> int:
    """The columns output may use: COLUMNS, else the terminal's width, else 80."""
    columns = _columns()
    if columns is not None:
        return columns
    if sys.stdout.isatty():
        return min(max(shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns, MIN_WIDTH), MAX_WIDTH)
    return DEFAULT_WIDTH


def console():
    """A rich console as wide as `width()`, writing to standard output as it is when
    printing (so a redirected stdout is honoured), with no highlighting of its own: the
    garden colours what it means to."""
    from rich.console import Console

    return Console(width=width(), soft_wrap=False, highlight=False, emoji=False)


def cells(text: str) -> int:
    """Terminal columns `text` takes: a CJK character takes two."""
    from rich.cells import cell_len

    return cell_len(text)


def visible(text) -> str:
    """Stored text on one line with its control and format characters escaped (a newline
    reads `\\n`, a right-to-left override `\\u202e`): stories, traces and cases are files
    anyone may have written, and what they hold is shown, never obeyed by the terminal."""
    from garden.text import one_line

    return one_line(str(text), 100_000)


def shorten(text, room: int) -> str:
    """`text` made visible and cut to `room` terminal cells, at a space where one is near,
    ending with an ellipsis when cut."""
    from rich.cells import set_cell_size

    text = visible(text)
    if cells(text) <= room:
        return text
    cut = set_cell_size(text, max(room - 1, 1)).rstrip()
    space = cut.rfind(" ")
    if space > len(cut) * 2 // 3:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "\u2026"


def _split_wide(word: str, room: int) -> list[str]:
    """A word wider than a line, cut between characters: only for text of wide (CJK)
    characters, where a line may break between any two; any other word is left whole."""
    from rich.cells import cell_len, chop_cells

    if not any(cell_len(ch) == 2 for ch in word):
        return [word]
    return chop_cells(word, room)


def wrap(line: str, columns: int | None = None, indent: str | None = None) -> list[str]:
    """One report line as the lines a reader sees: broken at spaces within `columns`
    (counted in terminal cells), the continuation indented past the line's own indent; the
    spaces within a line are kept (a column stays aligned). A single word wider than a line
    is left whole on a line of its own, never cut, unless it is CJK text, which breaks
    between characters as CJK does."""
    columns = columns or width()
    if cells(line) <= columns:
        return [line]
    lead = line[:len(line) - len(line.lstrip(" "))]
    rest = (lead + INDENT) if indent is None else indent
    out: list[str] = []
    current, gap = lead, ""
    for token in re.findall(r"\S+|\s+", line[len(lead):]):
        if token.isspace():
            gap = " " if "\n" in token or "\t" in token else token
            continue
        for piece in _split_wide(token, max(columns - cells(rest), 10)):
            if current.strip() and cells(current) + cells(gap) + cells(piece) > columns:
                out.append(current)
                current = rest + piece
            else:
                current += (gap if current.strip() else "") + piece
            gap = ""
    out.append(current)
    return out


def width_known() -> bool:
    """Whether the width is the reader's: COLUMNS is set or standard output is a terminal."""
    return _columns() is not None or sys.stdout.isatty()


def echo(lines, file=None, prose: bool = False) -> None:
    """Print report lines: wrapped at the reader's width when it is known, whole otherwise,
    so that a line naming one finding (a path, a record) stays one line for grep. `prose`:
    sentences for a person to read, wrapped at 80 even in a pipe or a file (read later in a
    terminal all the same)."""
    out = file or sys.stdout
    for line in lines:
        for part in (wrap(line) if prose or width_known() else [line]):
            print(part, file=out)


class Progress:
    """A count of work done, drawn in place on standard error while standard error is a
    terminal, and only once the work has run `delay` seconds: a quick command shows nothing.
    Used as a context manager; the line is cleared when the work ends.

    >>> with Progress("compare: default", total=1426, unit="questions") as bar:
    ...     for question in questions:
    ...         bar.advance()
    """

    DELAY = 1.0      # seconds before the first drawing
    EVERY = 0.2      # seconds between drawings
    PIPE_DELAY = 5.0   # not a terminal: seconds before the first line (a quick command writes none)
    PIPE_EVERY = 5.0   # and between lines

    def __init__(self, what: str, total: int | None = None, unit: str = "", delay: float | None = None,
                 stream=None):
        self.what, self.total, self.unit = what, total, unit
        self.stream = stream if stream is not None else sys.stderr
        self.live = _is_terminal(self.stream)
        self.delay = self.DELAY if delay is None else delay
        self.done = 0
        self.doing = ""          # what runs now (`locomo-conv-30 under default`), shown after the count
        self.start = time.monotonic()
        self.drawn_at: float | None = None
        self.closed = False
        self._lock = threading.Lock()

    def __enter__(self) -> "Progress":
        # a ticker, so that one long step (a model loaded, a collection encoded cold) still
        # shows the time passing on a terminal and still writes its line to a log
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)
        self._ticker.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _tick(self) -> None:
        while not self._stop.wait(min(self.EVERY, self.PIPE_EVERY) or 0.05):
            self.advance(0)

    def text(self) -> str:
        elapsed = time.monotonic() - self.start
        count = f"{self.done:,}/{self.total:,}" if self.total else f"{self.done:,}"
        unit = f" {self.unit}" if self.unit else ""
        doing = f"; {self.doing}" if self.doing else ""
        return f"{self.what}: {count}{unit}, {elapsed:.0f} s{doing}"

    def now(self, doing: str) -> None:
        """Say what runs now; drawn with the count."""
        self.doing = doing
        self.advance(0)

    def advance(self, n: int = 1) -> None:
        with self._lock:   # the ticker's thread and the work's
            self.done += n
            if self.closed:
                return
            if not self.live:
                self._line()
                return
            now = time.monotonic()
            if now - self.start < self.delay or (self.drawn_at is not None and now - self.drawn_at < self.EVERY):
                return
            self.drawn_at = now
            text = self.text()[:max(width() - 1, 10)]
            self.stream.write(f"\r{text}\x1b[K")
            self.stream.flush()

    def _line(self) -> None:
        """To a pipe or a file: a whole line now and then, never drawn over."""
        now = time.monotonic()
        if now - self.start < self.PIPE_DELAY or (self.drawn_at is not None and now - self.drawn_at < self.PIPE_EVERY):
            return
        self.drawn_at = now
        for part in wrap(self.text(), DEFAULT_WIDTH):
            self.stream.write(part + "\n")
        self.stream.flush()

    def close(self) -> None:
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()
        with self._lock:
            self.closed = True
            if self.live and self.drawn_at is not None:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
                self.drawn_at = None


def counted(items, bar: Progress):
    """`items`, each one advancing `bar`, which is cleared when they run out (or the loop
    over them stops)."""
    try:
        for item in items:
            bar.advance()
            yield item
    finally:
        bar.close()


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):   # closed, or not a file at all
        return False


def _plain(cell) -> str:
    from rich.text import Text

    if isinstance(cell, Text):
        return cell.plain
    return Text.from_markup(str(cell)).plain


def table_lines(table, columns: int | None = None) -> list[str]:
    """A rich table as lines, one row at a time (`header value: header value, ...`), for a
    terminal narrower than the table's narrowest layout."""
    columns = columns or width()
    headers = [_plain(c.header) for c in table.columns]
    cells_of = [list(c.cells) for c in table.columns]
    lines = wrap(_plain(table.title), columns) if table.title else []
    for row in range(table.row_count):
        first = f"{headers[0]} {_plain(cells_of[0][row])}".strip()
        rest = ", ".join(f"{headers[i]} {_plain(cells_of[i][row])}" for i in range(1, len(headers)))
        lines += wrap(f"{first}: {rest}" if rest else first, columns)
    if table.caption:
        lines += wrap(_plain(table.caption), columns)
    return lines


def print_table(table) -> None:
    """A rich table drawn to fit the terminal without breaking a word: compact (no side
    borders), its cells wrapped at spaces when it is wider than the terminal, and one row
    a line (`table_lines`) when even its narrowest layout is wider."""
    from rich import box
    from rich.measure import Measurement

    out = console()
    table.box = box.SIMPLE_HEAD
    for column in table.columns:
        # no column narrower than its longest word: rich would otherwise cut the word short
        words = [word for cell in [column.header, *column.cells] for word in _plain(cell).split()]
        column.min_width = max([column.min_width or 0, *(cells(word) for word in words)])
    # rich measures a table it may crop as narrow as one cell a column: the narrowest it can be
    # drawn without cutting a word is each column's longest word and its padding, and the box's
    # edge on either side and its divider between two columns (a space each, but a cell all the same)
    narrowest = sum(column.min_width + 2 for column in table.columns) + len(table.columns) + 1
    if narrowest <= out.width and Measurement.get(out, out.options, table).minimum <= out.width:
        out.print(table)
    else:
        for line in table_lines(table, out.width):
            print(line)
