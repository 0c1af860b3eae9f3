"""What one query carries into a pipeline."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from garden.models import DEFAULT_BUDGET, Hints, Settings, Story


@dataclass
class QuerySpec:
    story: Story
    query: str
    as_of: dt.date
    budget: int = DEFAULT_BUDGET
    hints: Hints = field(default_factory=Hints)
    include_private: bool = False
    settings: Settings = field(default_factory=Settings)
    session: list[str] = field(default_factory=list)
    story_path: str | None = None

    def earlier(self, query: str) -> "QuerySpec":
        """An earlier query of the same session: same world, no session of its own."""
        return QuerySpec(self.story, query, self.as_of, self.budget, self.hints,
                         self.include_private, self.settings, [], self.story_path)
