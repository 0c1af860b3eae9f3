"""What one query carries into a pipeline.

Its settings are those the query gives, as the stages' settings model or its base class
(`garden.models.SettingsBase`; none given: the base, empty). The pipeline resolves them
against the stages' declared defaults (`garden.rerank.stages.resolved`), so this module
imports nothing of the stage list: the context and the eligibility rules, which the stages import,
import it, and loading a `QuerySpec` loads no stage (docs/layers.md).
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from garden.errors import GardenError
from garden.models import DEFAULT_BUDGET, Hints, SettingsBase, Story, lone_surrogate
from garden.text import shown


@dataclass
class QuerySpec:
    story: Story
    query: str
    as_of: dt.date
    budget: int = DEFAULT_BUDGET
    hints: Hints = field(default_factory=Hints)
    include_private: bool = False
    settings: SettingsBase = field(default_factory=SettingsBase)  # those given; the pipeline resolves them
    session: list[str] = field(default_factory=list)
    story_path: str | None = None

    def __post_init__(self):
        # a shell passes a byte that is not UTF-8 as a lone surrogate, which no tokenizer
        # takes: refused with one line here, whatever door the query came by
        found = lone_surrogate(self.query)
        if found is not None:
            raise GardenError(f"query: holds {found}, which is no Unicode character (a byte that is not UTF-8, "
                              f"or a surrogate escape without its pair); query {shown(self.query)}")

    def earlier(self, query: str) -> "QuerySpec":
        """An earlier query of the same session: same world, no session of its own."""
        return QuerySpec(self.story, query, self.as_of, self.budget, self.hints,
                         self.include_private, self.settings, [], self.story_path)


# a question's shapes (the shape stage, garden/rerank/shape.py)
GATHERING = "gathering"
PINPOINT = "pinpoint"
SHAPES = (GATHERING, PINPOINT)


@dataclass(frozen=True)
class Shape:
    """A question's shape: `gathering` or `pinpoint`, and the cues that made it (rule ->
    the words that fired it), in the rules' order."""

    kind: str
    cues: tuple[tuple[str, str], ...] = ()

    @property
    def gathering(self) -> bool:
        return self.kind == GATHERING

    def explained(self) -> str:
        if not self.cues:
            return "pinpoint: no rule of a gathering question fired"
        return "gathering: " + "; ".join(f"{rule} ({words})" for rule, words in self.cues)
