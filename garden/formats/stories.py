"""Strict loading of stories: every rule of "Validation at build", every error at once.

A story is the durable source. Building it validates the whole file and only then writes
the derived index, aside and swapped in atomically, so a failed build leaves the previous
index untouched.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from pydantic import ValidationError

from garden.formats.layout import STORY_FOLDER
from garden.text import shown, shown_id
from garden.formats.jsonl_reader import SUFFIX, read_story_lines
from garden.formats.yaml_reader import describe_pydantic_error, read_yaml
from garden._bulk import collector_paused
from garden.errors import GardenError, StoryError
from garden.models import Record, Story
from garden.derived.home import derived_dir, derived_folder, refuse_link, remove_orphans, temp_prefix, write_whole
from garden.formats.attachments import attachment_errors

# A story can be written to fail once per record, field and list item; past this many
# problems the rest are counted, not listed, so the report stays readable and its size
# stays bounded whatever the file holds.
MAX_PROBLEMS = 1000
# a story name as a command or a case gives it: it names fixtures/<name>.yaml and nothing else
STORY_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*", re.ASCII)


def load_story(path: str | Path) -> Story:
    """Load and validate a story file; raise StoryError listing every problem found."""
    with collector_paused():
        return _load_story(Path(path))


def _load_story(path: Path) -> Story:
    key = None
    if path.suffix == SUFFIX:
        raw, key = read_story_lines(path)
    else:
        raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise StoryError([f"{path}: a story must be a mapping with story, project and records"])
    errors: list[str] = []
    records: list[Record] = []
    raw_ids: set[str] = set()        # every id written, even on a record that failed its schema
    dropped: set[str] = set()        # "<file>: record <id>: field <f>:" of fields dropped to keep checking
    unchecked: set[str] = set()      # label fields whose canonical table failed its schema
    raw_records = raw.get("records")
    if not isinstance(raw_records, list):
        errors.append(f"{path}: field records: must be a list of records (value {shown(raw_records)})")
        raw_records = []
    for n, raw_record in enumerate(raw_records, start=1):
        rid = raw_record.get("id") if isinstance(raw_record, dict) else None
        where = f"{path}: record {shown_id(rid)}" if rid else f"{path}: record #{n}"
        if not isinstance(raw_record, dict):
            errors.append(f"{where}: a record must be a mapping (value {shown(raw_record)})")
            continue
        if isinstance(rid, str):
            raw_ids.add(rid)
        record, bad = _validate_collecting(Record, raw_record, where, errors)
        if record is not None:
            records.append(record)
        else:
            # The rest of the record still takes part in the cross-record rules, so one
            # bad field does not hide the record's other errors or make references to it
            # look dangling.
            partial = _validate_without(Record, raw_record, bad)
            if partial is not None:
                records.append(partial)
                dropped.update(f"{where}: field {f}:" for f in bad)
    header = {k: v for k, v in raw.items() if k != "records"}
    story, bad = _validate_collecting(Story, {**header, "records": []}, str(path), errors)
    if story is None:
        fallback = {"story": path.stem, "project": ""}
        story = _validate_without(Story, {**fallback, **header, "records": []}, bad)
        if story is None:
            raise StoryError(_bounded(errors, path)) from None
        # a broken topics or entities table would make every label look non-canonical
        unchecked.update(f": field {f}:" for f in bad if f in ("topics", "entities"))
    story = story.model_copy(update={"records": records})
    story.__dict__.pop("_by_id", None)
    errors += [e for e in semantic_errors(story, path, raw_ids)
               if _field_prefix(e, path) not in dropped and not any(u in e for u in unchecked)]
    if errors:
        raise StoryError(_bounded(errors, path))
    if key is not None:
        story.__dict__["_key"] = key  # what `story_key` remembers: the bytes read, hashed as read
    return story


def grown_story(story: Story, path: Path, data: bytes, held: int) -> Story | None:
    """`story`, read from the JSON Lines file at `path` when it was `held` bytes long, with
    the records appended since (itself, when nothing was): the file's bytes now are `data`.
    None when the file changed
    otherwise than by whole lines at its end (its first `held` bytes are not what was read,
    or its last line is not whole): then it is read again whole. StoryError, as `load_story`
    raises it, when what was appended breaks a rule; every rule is checked again on the
    whole story, only the reading of the first `held` bytes is saved (a served story written
    to, garden/serve/_core.py: at a hundred thousand records, a fifth of the time)."""
    from garden.formats.jsonl_reader import _parse, content_digest

    key = story.__dict__.get("_key")
    if key is None or len(data) < held or not data.endswith(b"\n"):
        return None
    digest = content_digest(data[:held])
    if digest.hexdigest() != key:
        return None
    if len(data) == held:   # the same bytes: the same story, and all that was derived from it
        return story
    errors: list[str] = []
    added: list[Record] = []
    line_number = data.count(b"\n", 0, held)
    for line in data[held:].split(b"\n"):
        line_number += 1
        if not line.strip():
            continue
        raw = _parse(line, f"{path}:{line_number}")
        where = f"{path}: record {shown_id(raw.get('id'))}" if isinstance(raw, dict) and raw.get("id") \
            else f"{path}:{line_number}"
        if not isinstance(raw, dict):
            errors.append(f"{where}: a record must be a mapping (value {shown(raw)})")
            continue
        record, _ = _validate_collecting(Record, raw, where, errors)
        if record is not None:
            added.append(record)
    if errors:
        raise StoryError(_bounded(errors, path))
    grown = story.model_copy(update={"records": [*story.records, *added]})
    for derived in [k for k in grown.__dict__ if k.startswith("_")]:   # what was kept on the story it grew from
        del grown.__dict__[derived]
    errors = semantic_errors(grown, path)
    if errors:
        raise StoryError(_bounded(errors, path))
    digest.update(data[held:])
    grown.__dict__["_key"] = digest.hexdigest()
    return grown


def _field_prefix(message: str, path: Path) -> str | None:
    """"<file>: record <id>: field <f>:" of a message, found in one pass, so filtering
    stays linear in the number of problems, however many there are."""
    i = message.find(": field ", len(f"{path}: "))
    j = message.find(":", i + len(": field ")) if i >= 0 else -1
    return message[:j + 1] if j >= 0 else None


def _bounded(errors: list[str], path: Path) -> list[str]:
    if len(errors) <= MAX_PROBLEMS:
        return errors
    return errors[:MAX_PROBLEMS] + [f"{path}: {len(errors) - MAX_PROBLEMS} more problems not listed"]


def _validate_collecting(model, raw: dict, where: str, errors: list[str]):
    """(the model, no bad fields), or (None, the names of the fields that failed), each
    failure appended to `errors` as one located line."""
    try:
        return model.model_validate(raw), set()
    except ValidationError as exc:
        bad = set()
        for err in exc.errors():
            field, message = describe_pydantic_error(err)
            errors.append(f"{where}: field {field}: {message}")
            bad.add(str(err["loc"][0]) if err.get("loc") else "")
        return None, bad


def _validate_without(model, raw: dict, bad: set[str]):
    """`raw` minus the fields that failed, validated; None when what is left is still invalid."""
    try:
        return model.model_validate({k: v for k, v in raw.items() if k not in bad})
    except ValidationError:
        return None


def semantic_errors(story: Story, path: Path, known_ids: set[str] = frozenset()) -> list[str]:
    """Cross-record rules that a single record's schema cannot see.

    `known_ids` are ids written on records that failed their schema: references to them
    are not dangling."""
    errors: list[str] = []
    if story.name != path.stem:
        errors.append(f"{path}: field story: must equal the file stem {shown(path.stem)} "
                      f"(value {shown(story.name)})")
    topic_alias = {a.lower(): t for t, spec in story.topics.items() for a in (spec.aliases if spec else [])}
    entity_alias = {a.lower(): e for e, spec in story.entities.items() for a in (spec.aliases if spec else [])}
    if story.addressee is not None:
        errors += _label_errors(f"{path}: story {shown_id(story.name)}", "addressee", [story.addressee],
                                story.entities, entity_alias, "entity")
    for tid, spec in story.topics.items():
        for rel in spec.related if spec else []:
            if rel not in story.topics:
                errors.append(f"{path}: topic {shown_id(tid)}: field related: {shown(rel)} "
                              "is not a canonical topic id")
    ids: dict[str, int] = {}
    for record in story.records:
        ids[record.id] = ids.get(record.id, 0) + 1
    for rid, count in ids.items():
        if count > 1:
            errors.append(f"{path}: record {shown_id(rid)}: field id: duplicate id {shown(rid)} ({count} records)")
    for r in story.records:
        where = f"{path}: record {shown_id(r.id)}"
        if r.kind != "control" and not (r.text or "").strip():
            errors.append(f"{where}: field text: required for a {r.kind} record (value {shown(r.text)})")
        errors += _label_errors(where, "topics", r.topics, story.topics, topic_alias, "topic")
        errors += _label_errors(where, "entities", r.entities, story.entities, entity_alias, "entity")
        if r.speaker is not None:
            errors += _label_errors(where, "speaker", [r.speaker], story.entities, entity_alias, "entity")
        for field in ("sources", "related"):
            for ref in getattr(r, field):
                if ref not in ids and ref not in known_ids:
                    errors.append(f"{where}: field {field}: {shown(ref)} names no record in this story")
        if r.superseded_by is not None and r.superseded_by not in ids and r.superseded_by not in known_ids:
            errors.append(f"{where}: field superseded_by: {shown(r.superseded_by)} names no record in this story")
        if r.status == "superseded" and not r.superseded_by:
            errors.append(f"{where}: field superseded_by: status is superseded but superseded_by is empty (value None)")
        if r.last_confirmed_at and r.observed_at and r.last_confirmed_at < r.observed_at:
            errors.append(
                f"{where}: field last_confirmed_at: confirmed before it was observed "
                f"(value {r.last_confirmed_at}, observed_at {r.observed_at})"
            )
        if r.valid_to and r.valid_from and r.valid_to < r.valid_from:
            errors.append(
                f"{where}: field valid_to: ends before it starts (value {r.valid_to}, valid_from {r.valid_from})"
            )
    errors += _cycle_errors(story, path)
    errors += attachment_errors(story, path)  # durable bytes: present, inside the folder, as hashed
    return errors


def _label_errors(where, field, values, canonical, aliases, noun) -> list[str]:
    out = []
    for value in values:
        if value in canonical:
            continue
        hint = ""
        if value.lower() in aliases:
            hint = f"; it is an alias of {shown(aliases[value.lower()])}, use the canonical id"
        out.append(f"{where}: field {field}: {shown(value)} is not a canonical {noun} id{hint}")
    return out


def _cycle_errors(story: Story, path: Path) -> list[str]:
    """One message per supersession cycle, named by its smallest id and starting there.

    Every record is walked once (a long chain of supersessions is ordinary data and must
    not cost the square of its length)."""
    nxt = {r.id: r.superseded_by for r in story.records if r.superseded_by}
    done: set[str] = set()
    errors = []
    for start in sorted(nxt):
        walk: dict[str, int] = {}  # this walk's records, in order
        node = start
        while node in nxt and node not in done and node not in walk:
            walk[node] = len(walk)
            node = nxt[node]
        if node in walk:
            cycle = list(walk)[walk[node]:]
            first = cycle.index(min(cycle))
            cycle = cycle[first:] + cycle[:first]
            errors.append(f"{path}: record {shown_id(cycle[0])}: field superseded_by: "
                          f"supersession cycle {_chain(cycle)}")
        done.update(walk)
    return errors


CHAIN_SHOWN = 6  # records of a long cycle named before the rest are counted


def _chain(cycle: list[str]) -> str:
    names = [shown_id(rid) for rid in cycle[:CHAIN_SHOWN]]
    if len(cycle) > CHAIN_SHOWN:
        names.append(f"\u2026 ({len(cycle) - CHAIN_SHOWN} more)")
    return " -> ".join(names + [shown_id(cycle[0])])


# --- the derived index -------------------------------------------------------


def index_path(story_name: str) -> Path:
    # the name comes from a file stem, so it holds no slash; refused anyway, since the index
    # file must land in index/ itself and never be hidden among temporary files
    if not story_name or story_name.startswith(".") or any(c in story_name for c in "/\\\0"):
        raise GardenError(f"story {story_name[:80]!r}: cannot name an index file (empty, starts with '.', "
                          "or holds a path separator)")
    return derived_dir() / "index" / f"{story_name}.json"


def build_index(path: str | Path) -> Path:
    """Validate a story and write its derived index; on failure nothing is written.

    The index folder and file must be the garden's own (a link there is refused), and the
    write removes orphaned temporary files a killed build left (rule in `garden.derived.home`)."""
    path = Path(path)
    story = load_story(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    payload = {"source": str(path.resolve()), "sha256": digest, "story": story.model_dump(mode="json")}
    target = index_path(story.name)
    folder = derived_folder("index")
    refuse_link(target)
    remove_orphans(folder, ".tmp")
    write_whole(target, json.dumps(payload, indent=1, sort_keys=True).encode("utf-8"), prefix=temp_prefix(story.name))
    return target


def resolve_story_path(name: str, relative_to: Path | None = None) -> Path:
    """A story name (looked up in fixtures/ folders, as NAME.yaml, else NAME.jsonl) or a
    path ending in .yaml or .jsonl.

    A bare name must be a story name (STORY_NAME: no slash, no leading dot), so it always
    lands inside a fixtures/ folder: `../../etc/passwd` is refused, not looked up."""
    if name.endswith((".yaml", ".yml", SUFFIX)):
        candidate = Path(name)
        if not candidate.is_absolute() and relative_to is not None:
            candidate = relative_to / candidate
        if candidate.is_file():
            return candidate
        from garden._files import refuse_special

        refuse_special(candidate)
        raise GardenError(f"story file {candidate} does not exist")
    if not STORY_NAME.fullmatch(name):
        raise GardenError(f"story {name[:80]!r}: not a story name (lower-case letters, digits, '-', '_' and '.', "
                          "not starting with '.'); name a story file elsewhere by a path ending in .yaml")
    bases = []
    if relative_to is not None:
        bases += [relative_to, *relative_to.resolve().parents]
    bases += [Path.cwd()]
    for base in bases:
        for suffix in (".yaml", SUFFIX):  # hand-written first, then machine-written
            candidate = base / STORY_FOLDER / f"{name}{suffix}"
            if candidate.is_file():
                return candidate
    raise GardenError(f"no story named {name!r}: looked for fixtures/{name}.yaml and fixtures/{name}{SUFFIX}")


def find_story_files(root: Path | None = None) -> list[Path]:
    root = root or Path.cwd()
    return sorted([*(root / STORY_FOLDER).glob("*.yaml"), *(root / STORY_FOLDER).glob(f"*{SUFFIX}")])


def latest_date(story: Story):
    """The latest date the story mentions: a deterministic default for `as_of`."""
    latest = story.latest
    if latest is None:
        raise GardenError(f"story {story.name} has no dates; pass `as_of`")
    return latest
