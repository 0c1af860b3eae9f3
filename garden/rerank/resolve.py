"""Scoped resolution of what a query is about: topics by id and alias, entities by alias.

Aliases match on word boundaries and only whole: "observatory captain" resolves, the bare
shared word "captain" resolves to nothing. Related topics count one hop out with a decay.
Hints that are not canonical ids are warnings, never errors: strict data, permissive input.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from garden.text import shown
from garden.models import Hints, Story


@dataclass
class Resolution:
    topics: dict[str, float] = field(default_factory=dict)   # topic id -> weight (1 direct, decay related)
    topic_why: dict[str, str] = field(default_factory=dict)
    entities: dict[str, str] = field(default_factory=dict)   # entity id -> how it resolved
    projects: set[str] = field(default_factory=set)          # scopes named by resolved entities
    warnings: list[str] = field(default_factory=list)
    explicit_ids: list[str] = field(default_factory=list)    # record ids written in the query
    ambiguous: dict[str, list[str]] = field(default_factory=dict)  # a shared head word -> the entities it could mean

    @property
    def anchored(self) -> bool:
        return bool(self.topics or self.entities or self.explicit_ids)


def mentions(text: str, phrase: str) -> bool:
    """Whole-phrase match on word boundaries, case-insensitive; `_` in ids reads as a space."""
    words = phrase.replace("_", " ").strip().lower().split()
    if not words:
        return False
    pattern = r"(?<![\w-])" + r"\s+".join(re.escape(w) for w in words) + r"(?![\w-])"
    return re.search(pattern, text.lower()) is not None


def resolve(story: Story, query: str, hints: Hints | None = None, related_decay: float = 0.5) -> Resolution:
    res = Resolution()
    hints = hints or Hints()
    direct: dict[str, str] = {}
    for tid, spec in story.topics.items():
        names = [tid] + (spec.aliases if spec else [])
        hit = next((n for n in names if mentions(query, n)), None)
        if hit is not None:
            direct[tid] = f"topic {tid} named as {hit!r}"
    for tid in hints.topics:
        if tid in story.topics:
            direct.setdefault(tid, f"topic {tid} from a hint")
    res.warnings += _unknown_hints("topic", hints.topics, story.topics)
    for tid, why in sorted(direct.items()):
        res.topics[tid] = 1.0
        res.topic_why[tid] = why
    for tid in sorted(direct):
        spec = story.topics[tid]
        for rel in (spec.related if spec else []):
            if rel not in res.topics:
                res.topics[rel] = related_decay
                res.topic_why[rel] = f"topic {rel} related to {tid} (decay {related_decay:g})"
    for eid, spec in story.entities.items():
        aliases = (spec.aliases if spec else []) + ([spec.name] if spec and spec.name else [])
        hit = next((a for a in aliases if mentions(query, a)), None)
        if hit is not None:
            res.entities[eid] = f"entity {eid} named as {hit!r}"
    for eid in hints.entities:
        if eid in story.entities:
            res.entities.setdefault(eid, f"entity {eid} from a hint")
    res.warnings += _unknown_hints("entity", hints.entities, story.entities)
    for eid in res.entities:
        spec = story.entities[eid]
        res.projects.add((spec.project if spec and spec.project else story.project))
    res.ambiguous = ambiguous_heads(story, query, res.entities)
    res.explicit_ids = named_ids(story, query)
    return res


_ID_RUN = re.compile(r"[\w.-]+")


def named_ids(story: Story, query: str) -> list[str]:
    """The record ids the query names: an id that starts a run of word characters, dots
    and hyphens and ends where the run ends or at a dot ("see d1.3." names d1.3). One pass
    over the query, not one pattern per record: a conversation holds a thousand ids."""
    found = set()
    for m in _ID_RUN.finditer(query):
        run = m.group(0)
        for end in [i for i, ch in enumerate(run) if ch == "."] + [len(run)]:
            if run[:end] in story.by_id:
                found.add(run[:end])
    return sorted(found)


def ambiguous_heads(story: Story, query: str, resolved: dict[str, str]) -> dict[str, list[str]]:
    """Head words ("captain") that the query uses bare while two or more entities have an
    alias ending in them ("observatory captain", "ship captain") and none of those
    entities resolved: the query may mean any of them."""
    heads: dict[str, set[str]] = {}
    for eid, spec in story.entities.items():
        for alias in (spec.aliases if spec else []):
            words = alias.lower().split()
            if len(words) > 1:
                heads.setdefault(words[-1], set()).add(eid)
    return {head: sorted(eids) for head, eids in sorted(heads.items())
            if len(eids) > 1 and not eids & set(resolved) and mentions(query, head)}


HINTS_LISTED = 5   # unknown hints of a kind warned one by one; the rest are counted in one line
KNOWN_LISTED = 20  # canonical ids a warning lists


def _unknown_hints(noun: str, given, canonical: dict) -> list[str]:
    """One warning per distinct unknown hint, the first HINTS_LISTED of them, and one line
    counting the rest: ten thousand bad hints print six lines, not ten thousand."""
    unknown = list(dict.fromkeys(v for v in given if v not in canonical))
    ids = sorted(canonical)
    known = ", ".join(ids[:KNOWN_LISTED]) + (f" and {len(ids) - KNOWN_LISTED} more" if len(ids) > KNOWN_LISTED
                                             else "") if ids else "none"
    out = [f"hint {noun} {shown(v)} is not a canonical {noun} id (known: {known}); ignored"
           for v in unknown[:HINTS_LISTED]]
    if len(unknown) > HINTS_LISTED:
        out.append(f"{len(unknown) - HINTS_LISTED} more unknown {noun} hints ignored")
    return out
