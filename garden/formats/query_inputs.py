"""A query's inputs as a caller gives them, read in one place for the three doors: the
command line's flags, the API's arguments and a served request's fields. Each reader
returns the value the query runs with or raises GardenError with one line per problem,
named by the input, so the three refuse the same input with the same line. A door adds
only what is its own: the command line its flags' names, a server its bounds on what one
request may cost (garden/serve/_core.py) and its status codes.

Pipeline names are read where pipelines are made (`garden.pipelines.check_pipeline`), and
a setting the chosen pipeline has no stage to use is refused there too
(`check_settings`); `query_inputs` reads them all for one query.
"""
from __future__ import annotations

import datetime as dt
import re
from typing import Any, Mapping, Sequence

from garden.errors import GardenError
from garden.formats.yaml_reader import validated
from garden.models import Hints, SettingsBase, check_query_text
from garden.rerank.stages import Settings
from garden.text import shown

DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)   # a date as the inputs take it: YYYY-MM-DD, no other ISO form


def read_date(value: Any, where: str | None = None) -> dt.date:
    """A `datetime.date` (a datetime's date) or its YYYY-MM-DD text, from 0001-01-01 to
    9999-12-31. `where` names the input (the command line's parser names its flag itself)."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str) and DATE.fullmatch(value):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            pass
    raise GardenError(_named(where, f"not a date (YYYY-MM-DD, from 0001-01-01 to 9999-12-31): {shown(value, 80)}"))


def read_as_of(value: Any) -> dt.date | None:
    """The injected now; None leaves it to the story (the latest date it mentions)."""
    return None if value is None else read_date(value, "as_of")


def read_budget(value: Any, where: str | None = "budget") -> int:
    """A packet budget: a whole number of characters, at least 1 (never a bool, never 2.5)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise GardenError(_named(where, f"a positive whole number of characters, got {shown(value, 80)}"))
    return value


def _named(where: str | None, line: str) -> str:
    return f"{where}: {line}" if where else line


def read_settings(value: "SettingsBase | Mapping[str, Any] | None") -> Settings:
    """The stages' settings a query gives (None: none), each checked by its declared type
    and bounds; one line per problem, `settings: field NAME: ...`."""
    if value is None:
        return Settings()
    if isinstance(value, Settings):
        return value
    if isinstance(value, SettingsBase):   # the empty base a query that gave none carries
        return Settings(**value.model_dump(exclude_none=True))
    return validated(Settings, value, "settings")


def read_hints(value: "Hints | Mapping[str, list[str]] | None") -> Hints:
    """`{"topics": [...], "entities": [...]}`, or None for none."""
    if value is None:
        return Hints()
    return value if isinstance(value, Hints) else validated(Hints, value, "hints")


def check_texts(text: Any, session: Sequence[Any] = ()) -> None:
    """The query's text and each of its session's earlier queries: words to search for,
    never blank, free of control characters."""
    if not isinstance(text, str):
        raise GardenError(f"query text: expected a string, got {type(text).__name__}")
    for where, one in (("query text", text), *((f"session: query #{n}", q) for n, q in enumerate(session, 1))):
        try:
            check_query_text(one)
        except ValueError as exc:
            raise GardenError(f"{where}: {exc}") from None


def query_inputs(pipeline, text: Any, as_of: Any, budget: Any, hints: Any, settings: Any,
                 session: Sequence[Any]) -> tuple[dt.date | None, int, Hints, Settings]:
    """Every input of one query read, in the order a person reads a refusal: the text and
    the session, the budget, the date, the hints, the settings, and last whether the
    pipeline (a name or one made) has a stage for each setting given."""
    from garden.pipelines import check_settings

    check_texts(text, session)
    budget = read_budget(budget)
    as_of = read_as_of(as_of)
    hints, settings = read_hints(hints), read_settings(settings)
    # a setting no stage of the pipeline uses is refused rather than silently ignored
    # (`pipeline="bm25", settings={"standout": 2}`)
    check_settings(pipeline, settings, "settings")
    return as_of, budget, hints, settings
