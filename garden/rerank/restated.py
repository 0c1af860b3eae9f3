"""The restated stage: a raw record rides as the shorter note drawn from it.

A note (an observation) is a record's own restatement of raw material, and its `sources`
name what it was drawn from. Once a packet shows a note, the turn it cites is shown too:
the reader is told which turn it restates and can ask for it by id (pack.py already skips
a raw record a packed item cites, `already_shown`). The same holds the other way round:
when the ranking puts a raw record first, the shortest note citing it tells the reader
the same thing in fewer characters, and the characters saved go to evidence the packet
lacks. With this stage armed, the pack stage packs, in a raw record's place, the shortest
note that cites it and is shorter than it (ties by id), when that note passes the eligibility check
for this query (`admit`, door `restates`: a soft rule such as off-topic applies, the hard
ones always) and was not rejected for anything but its own rank (a note cut by `min_share`
still restates the record that earned the place). The raw record is then rejected
`already_shown`, its detail naming the note; the note carries `provenance_supported`
("restates d1.3, ...") and keeps its own score. A note that does not fit does not open
the way for the longer record behind it.

On LoCoMo (Maharana et al., ACL 2024), where a session's observations are such notes, the
LoCoMo paper itself finds observations the most useful unit to retrieve; here the packet
keeps the ranking's turns and reads them off their notes (docs/packet.md gives what it is
worth, with every answer forced and with the gate).
"""
from __future__ import annotations

from garden.derived.tables import groups_codec, table
from garden.models import Record, Story
from garden.rerank.candidates import Candidate
from garden.rerank.context import PackRule, QueryContext, StageBase

# a note cut only by its own rank may still stand for the record that earned the place
LIFTED = ("rank_cut",)


class NotesCiting:
    """Record id -> the notes citing it, folded record by record (garden/derived/tables.py):
    each note's size and id under every record it names, sorted at the end."""

    def __init__(self, story: Story):
        self.found: dict[str, list[tuple[int, str]]] = {}

    def add(self, r: Record) -> None:
        if r.kind == "note":
            for sid in r.sources:
                self.found.setdefault(sid, []).append((len(r.body), r.id))

    def value(self) -> dict[str, tuple[str, ...]]:
        return {sid: tuple(rid for _, rid in sorted(notes)) for sid, notes in self.found.items()}


NOTES_CITING = table("notes_citing", NotesCiting, groups_codec())


def notes_citing(story: Story) -> dict[str, tuple[str, ...]]:
    """Record id -> the notes that cite it, shortest first (ties by id); remembered on the
    story, which never changes, and saved (garden/derived/tables.py)."""
    return NOTES_CITING.of(story)


def shorter_note(ctx: QueryContext, c: Candidate, packed: set[str]) -> Candidate | None:
    """The note to pack in raw record `c`'s place (see the module docstring), or None."""
    if c.certain or c.record.sources or c.record.kind not in ("source", "chunk"):
        return None  # a record reached by a certain route (a decision's source) is packed as itself
    story = ctx.spec.story
    for nid in notes_citing(story).get(c.id, ()):
        note = story.by_id[nid]
        if len(note.body) >= len(c.record.body):
            return None  # shortest first: none after it is shorter either
        if nid in packed:
            continue
        n = ctx.candidates.get(nid)
        if n is not None and n.reason in LIFTED:
            n.reason, n.detail = None, None
        n = ctx.admit(note, "restates")
        if n.reason is None:
            return n
    return None


def shown_through(c: Candidate, note: Candidate) -> None:
    """Record that `note` rides in raw record `c`'s place."""
    note.label("provenance_supported", f"restates {c.id}, which the ranking chose "
                                       f"({len(note.record.body)} characters instead of {len(c.record.body)})")
    c.reject("already_shown", f"shown through {note.id}, the shorter note drawn from it")


class ShorterNote(PackRule):
    """The restated stage's packing rule: a raw record rides as its shorter note
    (`shorter_note`, `shown_through`), which the pack stage asks while packing."""

    def instead(self, ctx: QueryContext, c: Candidate, packed_ids: set[str]) -> Candidate | None:
        return shorter_note(ctx, c, packed_ids)

    def shown_through(self, c: Candidate, item: Candidate) -> None:
        shown_through(c, item)

    def noted(self, c: Candidate, item: Candidate, span: tuple[int, int] | None) -> str:
        return f" (as {item.id}, the shorter note drawn from {c.id})" if item is not c else ""


class Restated(StageBase, name="restated", mode="selects", writes=("pack_rules",),
               labels=("provenance_supported",), supports=("provenance_supported",),
               title="Restated: a raw record rides as its shorter note", tables=(NOTES_CITING,),
               drawn="a raw record rides as the shorter note drawn from it"):
    """Arms its packing rule: which notes are free is known only while packing, so the pack
    stage asks the rule then."""


    def run(self, ctx: QueryContext) -> None:
        ctx.pack_rules.append(SHORTER_NOTE)


SHORTER_NOTE = ShorterNote()
