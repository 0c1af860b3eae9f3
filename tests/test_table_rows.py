"""garden/_table_rows.py prints a table exactly as rich does (the reference): rows of plain
text written on rich's own layout, any other row laid out by rich, the same characters."""
from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table

from garden._table_rows import print_table

WORDS = ["a", "rank_cut", "0.0207 is under 0.3", "冰川", "state.tide.card-index", "", "  ", "x" * 70,
         "superseded by d1.3; see d1.4", "topics first_aid (query: sled_repair)", "[bold]no[/bold]", "\\[escaped]",
         ":smile:", "a:b:c", "tab\there", "line\nbreak", "wide " + "冰川" * 16,
         "a " * 50, "ends with backslash\\", "\u2028sep"]


def _table(columns: int, title: str | None) -> Table:
    table = Table(title=title)
    for n in range(columns):
        table.add_column(f"col{n}", overflow="fold")
    return table


def _printed(rows, columns, width, title, fast: bool, color: bool = False) -> str:
    console = Console(file=io.StringIO(), width=width, soft_wrap=False, force_terminal=color,
                      color_system="standard" if color else None)
    table = _table(columns, title)
    if fast:
        print_table(console, table, rows)
    else:
        for row in rows:
            table.add_row(*row)
        console.print(table)
    return console.file.getvalue()


@settings(max_examples=200, deadline=None, derandomize=True)
@given(columns=st.integers(1, 4), data=st.data(), width=st.sampled_from([40, 80, 160]),
       title=st.sampled_from([None, "rejected"]))
def test_a_table_prints_as_rich_prints_it(columns, data, width, title):
    cell = st.one_of(st.sampled_from(WORDS), st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]),
                                                     max_size=30))
    rows = data.draw(st.lists(st.lists(cell, min_size=columns, max_size=columns), max_size=25))
    assert _printed(rows, columns, width, title, fast=True) == _printed(rows, columns, width, title, fast=False)


def test_a_terminal_gets_rich_whole_styles_and_all():
    rows = [["state.a", "0.25", "plain words"], ["b", "1", "more"]]
    fast = _printed(rows, 3, 80, "t", fast=True, color=True)
    assert fast == _printed(rows, 3, 80, "t", fast=False, color=True) and "\x1b[" in fast


def test_thousands_of_plain_rows_take_a_few_rich_layouts(monkeypatch):
    """The point of it: rich lays out the marker rows, not each row (counted, not timed)."""
    import rich.table

    calls = []
    real = rich.table.Table._render

    def counted(self, *args, **kwargs):
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(rich.table.Table, "_render", counted)
    rows = [[f"src.{n:07d}", "rank_cut", f"0.{n:04d} is under 0.3 of the query's best 0.4672"] for n in range(3000)]
    text = _printed(rows, 3, 160, "rejected", fast=True)
    assert text.count("\n") == 3000 + 5 and len(calls) <= 2
