"""`garden doctor`: the store's integrity rules, checked and (for mutable derived files) repaired.

Facts are gathered first (one pass over the store, never following a link), then each
rule, a small pure function chosen by name, judges one fact. Enforced rules decide the exit
code; a report-only rule is an advisory, printed on every exit, green or not. Repair changes
only what an enforced rule found on a mutable derived file (its mode), never an
attachment's bytes or mode, never a link or its target.
"""
from __future__ import annotations

import os
import stat
from collections import Counter
from dataclasses import dataclass, replace, field
from pathlib import Path

from pydantic import ValidationError

from garden.errors import GardenError
from garden.formats.yaml_reader import read_yaml
from garden.models import Attachment
from garden.formats.attachments import check_attachment, inside
from garden.formats.layout import DURABLE_FOLDERS, StoreLayout, is_derived_store
from garden.text import shown_id

OWNER_ONLY = 0o077   # group and other bits: none may be set on derived data
WRITE_BITS = 0o222


@dataclass(frozen=True)
class Entry:
    """One file, folder or link met in the store, as lstat saw it."""

    path: Path
    part: str                    # "durable" or "derived"
    kind: str                    # "file", "folder" or "link"
    mode: int
    ino: tuple[int, int] = (0, 0)
    resolved: Path | None = None  # a link's target, resolved but never opened
    boundary: Path | None = None  # the folder a link must stay within
    unreadable: str | None = None  # a folder that could not be listed: why (what is below it is unknown)
    uid: int = -1                  # its owner


@dataclass(frozen=True)
class AttachmentFact:
    path: Path                   # where the story says the attachment is
    story: Path
    record: str
    index: int
    problem: str | None          # None: inside the story's folder, and its bytes match
    mode: int | None             # the file's mode, when it could be read


@dataclass(frozen=True)
class Finding:
    rule: str
    enforced: bool
    path: str
    detail: str
    repair: str

    def to_json(self) -> dict:
        return {"rule": self.rule, "enforcement": "enforced" if self.enforced else "report-only",
                "path": self.path, "detail": self.detail, "repair": self.repair}

    def line(self) -> str:
        kind = "ENFORCED" if self.enforced else "advisory"
        return f"{kind} {self.rule} {self.path}: {self.detail}; repair: {self.repair}"


# --- the rules: each judges one fact --------------------------------------------------------


DERIVED_PARTS = ("derived", "cache")   # the garden home, and the user's cache (embeddings, exported models)
CACHE_REPAIR = "none needed (the garden does not read it: it makes it anew, owner-only, on next use); or remove it"


def derived_owner_only(entry: Entry, shown: str) -> Finding | None:
    """Enforced: every derived file and folder is owner-only (no group or other bits), since
    traces hold every query asked and indexes every record; in the user's cache too, where
    the garden refuses to read such a file (garden.derived.home, "trust")."""
    if entry.part not in DERIVED_PARTS or entry.kind == "link" or not entry.mode & OWNER_ONLY:
        return None
    now, fixed = stat.S_IMODE(entry.mode), stat.S_IMODE(entry.mode) & ~OWNER_ONLY
    return Finding("derived-owner-only", True, shown, f"{entry.kind} mode {now:04o} grants group or other access",
                   CACHE_REPAIR if entry.part == "cache" else f"chmod {fixed:04o}")


def derived_store(entry: Entry, shown: str) -> Finding | None:
    """Report-only: a Milvus Lite store made inside the durable part. It is derived (built
    from the stories), so backup leaves it out; it belongs under the garden home."""
    if entry.kind != "derived-store":
        return None
    return Finding("derived-store", False, shown, "a Milvus Lite store (derived data) inside the durable part; "
                   "backup leaves it out", "none needed; move it under the garden home or remove it (it rebuilds)")


def link_contained(entry: Entry, shown: str) -> Finding | None:
    """Enforced: no symlink inside the store resolves outside it (the root for the durable
    part, the garden home for the derived part). Reported, never followed, never repaired:
    the link and its target are left as they are."""
    if entry.kind != "link" or inside(entry.resolved, entry.boundary):
        return None
    return Finding("link-contained", True, shown, f"symbolic link resolves to {entry.resolved}, outside "
                   f"{entry.boundary}; not followed", "none (remove or replace the link by hand; its target is "
                   "never touched)")


def attachment_hash(fact: AttachmentFact, shown: str) -> Finding | None:
    """Enforced: an attachment's bytes match the sha256 its story records (and it is there,
    inside the story's folder, to be hashed)."""
    if fact.problem is None:
        return None
    return Finding("attachment-hash", True, shown, f"record {shown_id(fact.record)} attachments[{fact.index}]: "
                   f"{fact.problem}", "none (frozen bytes are never rewritten: restore the file from a backup)")


def attachment_read_only(fact: AttachmentFact, shown: str) -> Finding | None:
    """Report-only: an attachment is read-only (no write bits), so nothing rewrites it by
    accident. Advisory, since a checkout or a copy often leaves files writable."""
    if fact.mode is None or not fact.mode & WRITE_BITS:
        return None
    return Finding("attachment-read-only", False, shown, f"mode {stat.S_IMODE(fact.mode):04o} has write bits",
                   "none (repair never changes an attachment; `chmod a-w` it by hand)")


def story_readable(problem: str | None, shown: str) -> Finding | None:
    """Enforced: a story whose attachments cannot be listed cannot be checked."""
    if problem is None:
        return None
    return Finding("story-readable", True, shown, f"its attachments cannot be listed: {problem}",
                   "none (fix the story: `garden check` names the field)")


def derived_owner(entry: Entry, shown: str) -> Finding | None:
    """Enforced: everything under the garden home is owned by the user who runs the garden.
    A saved index is data (arrays read with pickle refused), but one another user put there
    could still steer every ranking the garden gives (the index cache refuses to load it,
    and this says so)."""
    me = os.geteuid()
    if entry.part not in DERIVED_PARTS or entry.uid in (-1, me):
        return None
    return Finding("derived-owner", True, shown, f"{entry.kind} owned by uid {entry.uid}, not uid {me} who runs "
                   "the garden; another user could have written what the garden reads back",
                   CACHE_REPAIR if entry.part == "cache" else "none (remove it: derived data is rebuilt; or chown "
                   "it back)")


def folder_readable(entry: Entry, shown: str) -> Finding | None:
    """Enforced: every folder of the store can be listed; what is below one that cannot is
    neither checked nor backed up."""
    if entry.unreadable is None:
        return None
    return Finding("folder-readable", True, shown, f"folder cannot be listed: {entry.unreadable}; nothing below "
                   "it was checked", "none (give the user who runs the garden read and search access to it)")


ENTRY_RULES = {"derived-owner-only": derived_owner_only, "derived-owner": derived_owner,
               "link-contained": link_contained, "folder-readable": folder_readable, "derived-store": derived_store}
ATTACHMENT_RULES = {"attachment-hash": attachment_hash, "attachment-read-only": attachment_read_only}
RULES = {**ENTRY_RULES, **ATTACHMENT_RULES, "story-readable": story_readable}
ENFORCEMENT = {name: "report-only" if name in ("attachment-read-only", "derived-store") else "enforced"
               for name in RULES}


# --- gathering the facts --------------------------------------------------------------------


def _entry(path: Path, part: str, boundary: Path) -> Entry | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    ino = (st.st_dev, st.st_ino)
    if stat.S_ISLNK(st.st_mode):
        # resolved as a path only: realpath reads the link, it opens nothing at its end
        return Entry(path, part, "link", st.st_mode, ino, Path(os.path.realpath(path)), boundary, uid=st.st_uid)
    kind = "folder" if stat.S_ISDIR(st.st_mode) else "file"
    if kind == "folder" and part == "durable" and is_derived_store(path):
        kind = "derived-store"   # listed, never entered: what is below it is the engine's
    return Entry(path, part, kind, st.st_mode, ino, uid=st.st_uid)


def walk(top: Path, part: str, boundary: Path) -> list[Entry]:
    """`top` and everything below it, sorted; a link is listed, never entered."""
    first = _entry(top, part, boundary)
    if first is None:
        return []
    entries, pending = [first], [first]
    while pending:
        entry = pending.pop()
        if entry.kind != "folder":
            continue
        try:
            names = sorted(os.listdir(entry.path))
        except OSError as exc:   # never skipped in silence: a backup would lack it, doctor would miss it
            entries[entries.index(entry)] = replace(entry, unreadable=exc.strerror or str(exc))
            continue
        for name in names:
            child = _entry(entry.path / name, part, boundary)
            if child is not None:
                entries.append(child)
                pending.append(child)
    return sorted(entries, key=lambda e: str(e.path))


def attachment_facts(layout: StoreLayout) -> tuple[list[AttachmentFact], list[tuple[Path, str]]]:
    """Every attachment the stories declare, checked; and the stories that cannot be read."""
    facts, unreadable = [], []
    for story in layout.story_files():
        try:
            raw = read_yaml(story)
        except GardenError as exc:
            unreadable.append((story, exc.messages[0]))
            continue
        records = raw.get("records") if isinstance(raw, dict) else None
        for record in records if isinstance(records, list) else []:
            if not isinstance(record, dict) or not record.get("attachments"):
                continue
            rid = str(record.get("id"))
            try:
                attachments = [Attachment.model_validate(a) for a in record["attachments"]]
            except (ValidationError, TypeError):
                unreadable.append((story, f"record {shown_id(rid)}: field attachments is malformed"))
                continue
            for n, attachment in enumerate(attachments):
                found = check_attachment(story.parent, attachment)
                location = found.location or story.parent / attachment.path
                mode = None
                if found.location is not None:
                    try:
                        mode = os.stat(found.location).st_mode  # inside the folder: safe to resolve
                    except OSError:
                        pass
                facts.append(AttachmentFact(location, story, rid, n, found.problem, mode))
    return facts, unreadable


# --- the report -----------------------------------------------------------------------------


@dataclass
class DoctorReport:
    layout: StoreLayout
    findings: list[Finding]
    checked: Counter
    repaired: list[dict] = field(default_factory=list)
    cache: dict = field(default_factory=dict)  # the user's embedding cache (garden.derived.embeddings.describe)

    @property
    def enforced(self) -> list[Finding]:
        return [f for f in self.findings if f.enforced]

    @property
    def advisories(self) -> list[Finding]:
        return [f for f in self.findings if not f.enforced]

    def exit_code(self) -> int:
        return 1 if self.enforced else 0

    def summary(self) -> str:
        c = self.checked
        durable = ", ".join(f"{name}/" for name in DURABLE_FOLDERS)
        return (f"checked {c['stories']} stories, {c['attachments']} attachments, {c['files']} files, "
                f"{c['folders']} folders, {c['links']} links (durable: {durable}; derived: "
                f"{self.layout.shown(self.layout.home)}/): {len(self.enforced)} enforced, "
                f"{len(self.advisories)} advisory; exit {self.exit_code()}")

    def cache_line(self) -> str:
        c = self.cache
        spaces = "; ".join(f"{space}: {count} vectors" for space, count in c["spaces"].items()) or "empty"
        problem = f"; unreadable ({c['error']}), healed on next use" if c.get("error") else ""
        return (f"embedding cache {c['path']}: {c['bytes'] / 1024**2:.1f} MiB of a {c['limit'] / 1024**2:.0f} MiB "
                f"limit (GARDEN_CACHE_LIMIT; least recently used pruned past it); {spaces}{problem}")

    def lines(self) -> list[str]:
        out = [f"repaired {r['rule']} {r['path']}: mode {r['from']} -> {r['to']}" for r in self.repaired]
        cache = [self.cache_line()] if self.cache else []
        return out + [f.line() for f in self.findings] + cache + [self.summary()]

    def to_json(self) -> dict:
        return {"root": str(self.layout.root), "home": str(self.layout.home), "durable": list(DURABLE_FOLDERS),
                "rules": ENFORCEMENT,
                "checked": dict(sorted(self.checked.items())), "findings": [f.to_json() for f in self.findings],
                "repaired": self.repaired, "enforced": len(self.enforced), "advisories": len(self.advisories),
                "cache": self.cache, "exit": self.exit_code()}


def diagnose(layout: StoreLayout) -> tuple[list[Finding], Counter, list[Entry]]:
    """Every finding in the store, sorted by path then rule; what was checked; the entries."""
    root_boundary = Path(os.path.realpath(layout.root))
    entries: list[Entry] = []
    for folder in layout.durable_folders():
        entries += walk(folder, "durable", root_boundary)
    # The home itself may be a link the user made (as GARDEN_HOME may be): it is followed, as
    # every command follows it, and what is below it must stay below it.
    home = Path(os.path.realpath(layout.home))
    derived = walk(home, "derived", home)
    entries += derived
    entries += _cache_entries()
    findings: list[Finding] = []
    for entry in entries:
        shown = layout.shown(layout.home / entry.path.relative_to(home)) if entry.part == "derived" \
            else str(entry.path) if entry.part == "cache" else layout.shown(entry.path)
        findings += [f for rule in ENTRY_RULES.values() if (f := rule(entry, shown))]
    facts, unreadable = attachment_facts(layout)
    for fact in facts:
        findings += [f for rule in ATTACHMENT_RULES.values() if (f := rule(fact, layout.shown(fact.path)))]
    findings += [story_readable(problem, layout.shown(story)) for story, problem in unreadable]
    checked = Counter({"stories": len(layout.story_files()), "attachments": len(facts), "files": 0,
                       "folders": 0, "links": 0})
    checked.update(entry.kind + "s" for entry in entries if entry.part != "cache")
    return sorted(findings, key=lambda f: (f.path, f.rule)), checked, entries


def _cache_entries() -> list[Entry]:
    """What the user's cache holds (its embeddings and exported models), as entries of the
    `cache` part; none when the cache cannot be located (GARDEN_CACHE unusable: the commands
    that need it say so)."""
    from garden.derived.cache import CACHE_FOLDERS, user_cache_dir

    try:
        root = Path(os.path.realpath(user_cache_dir()))
    except Exception:   # noqa: BLE001 - no cache to describe is not a finding of the store
        return []
    return [e for folder in CACHE_FOLDERS for e in walk(root / folder, "cache", root)]


def _repair_mode(entry: Entry) -> tuple[int, int] | None:
    """Strip group and other bits from one derived file or folder, through a descriptor
    opened without following links, and only if it is still the entry the scan saw; the
    modes before and after, or None when there was nothing (left) to change."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(entry.path, flags)
    except OSError:
        return None  # gone, or replaced by a link since the scan: nothing is done through it
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != entry.ino or not st.st_mode & OWNER_ONLY:
            return None
        before = stat.S_IMODE(st.st_mode)
        os.fchmod(fd, before & ~OWNER_ONLY)
        return before, before & ~OWNER_ONLY
    finally:
        os.close(fd)


def run_doctor(root: str | Path | None = None, repair: bool = False) -> DoctorReport:
    """Check the store at `root`; with `repair`, fix the mode of mutable derived files that
    break an enforced rule, then check again and report what remains."""
    from garden.derived.embeddings import describe

    layout = StoreLayout.at(root)
    findings, checked, entries = diagnose(layout)
    cache = describe()
    if not repair:
        return DoctorReport(layout, findings, checked, cache=cache)
    repaired = []
    home = Path(os.path.realpath(layout.home))
    for entry in entries:
        if entry.part != "derived" or entry.kind == "link" or not entry.mode & OWNER_ONLY:
            continue
        changed = _repair_mode(entry)
        if changed:
            shown = layout.shown(layout.home / entry.path.relative_to(home))
            repaired.append({"rule": "derived-owner-only", "path": shown,
                             "from": f"{changed[0]:04o}", "to": f"{changed[1]:04o}"})
    findings, checked, _ = diagnose(layout)
    return DoctorReport(layout, findings, checked, repaired, cache)
