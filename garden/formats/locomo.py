"""`garden import locomo`: LoCoMo conversations as garden stories and cases.

LoCoMo (Maharana et al., ACL 2024, "Evaluating Very Long-Term Conversational Memory of
LLM Agents"; data CC BY-NC 4.0) is a public benchmark of very long two-person
conversations whose question annotations name the dialogue turns that answer them. It
is the set the agent-memory field publishes retrieval figures on, so importing it lets
every garden pipeline be measured on real conversations rather than only on the
hand-written fictional stories.

Two layouts are read: one conversation per file (`conv-26.json`: `speaker_a`,
`session_N`, `session_N_date_time`, `session_N_observation`, `session_N_summary`, `qa`
at the top) and the released `locomo10.json` (a list of samples holding the same fields
under `conversation`, `observation`, `session_summary`, `qa`). Both become the same
story, byte for byte.

Mapping, per conversation:

- each speaker is an entity (id a slug of the name, the name its alias);
- each turn is a `source` record `d<session>.<turn>` dated by its session, its text
  written with its speaker and, where a photo was shared, the photo's caption; its
  `speaker` is the entity who said it. A turn has no `entities`: the eligibility rules read them as
  what a record is about, and a turn is said by a person, often about the other one (an
  entity on each turn made every turn of the other speaker `off_topic` for a question
  naming one of them);
- each observation (a short fact generated from a session, citing turns) is a `note`
  of fidelity `summary` whose `sources` are the turns it cites;
- each session summary is a `view` of its session, its `sources` the session's turns;
- each question is a case whose `expect.include` lists its evidence turns: judgments
  for `garden compare`, not expectations a pipeline must pass (the cases are in neither
  `regression/` nor `challenge/`, so they never fail a run). Answers are kept out of the
  expectations and only mentioned in `about`.

The released annotations hold a few malformed evidence ids (`"D8:6; D9:17"`,
`"D:11:26"`, `"D30:05"`, `"D"`) and some that name no turn. One whose intent is
unambiguous is repaired, any other dropped; both are counted and reported, never fatal.
Input that cannot be read as LoCoMo at all (not JSON, the wrong shape, a required key
missing) is bad input: every problem one located line, and nothing written.
"""
from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from garden.formats.layout import CASES_FOLDER, STORY_FOLDER
from garden._files import read_regular
from garden.errors import GardenError
from garden.formats._staged import move_staged, staging_folder
from garden.formats.stories import semantic_errors
from garden.formats.yaml_reader import MAX_FILE_BYTES, describe_pydantic_error
from garden.models import Story
from garden.formats.cases import Case
from garden._terminal import Progress, counted
from garden.text import shown

CITATION = ('LoCoMo (Maharana et al., ACL 2024, "Evaluating Very Long-Term Conversational Memory '
            'of LLM Agents"; data CC BY-NC 4.0)')
# Category numbers as most harnesses read them (ABOUT.md of the data: the questions bear
# this reading out; some name 1 and 4 the other way round).
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
# The released locomo10.json is under 3 MB; this bounds a read without refusing any real file.
MAX_JSON_BYTES = 64 * 1024 * 1024

SESSION_KEY = re.compile(r"session_(\d+)")
DIA_ID = re.compile(r"D(\d+):(\d+)")
# A loose evidence id: an optional stray colon after D ("D:11:26"), leading zeros ("D30:05").
LOOSE_ID = re.compile(r"D:?(\d+):(\d+)", re.IGNORECASE)
DATE_TIME = re.compile(r"\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*",
                       re.IGNORECASE)
MONTHS = {m: i for i, m in enumerate(["january", "february", "march", "april", "may", "june", "july",
                                       "august", "september", "october", "november", "december"], start=1)}


# --- parsing -------------------------------------------------------------------------


def parse_date_time(text: Any) -> dt.date | None:
    """The date of a LoCoMo session stamp such as "1:56 pm on 8 May, 2023", or None.

    Only the date becomes `at` (a record's date has no time); the stamp as written,
    time of day included, is kept in each record's title."""
    if not isinstance(text, str):
        return None
    m = DATE_TIME.fullmatch(text)
    if not m:
        return None
    hour, minute, month = int(m.group(1)), int(m.group(2)), MONTHS.get(m.group(5).lower())
    if month is None or not 1 <= hour <= 12 or minute > 59:
        return None
    try:
        return dt.date(int(m.group(6)), month, int(m.group(4)))
    except ValueError:
        return None


def turn_id(session: int, turn: int) -> str:
    """A garden record id for dia_id D<session>:<turn> (ids are [a-z0-9_.-]+)."""
    return f"d{session}.{turn}"


def slug(name: str) -> str:
    """A canonical id from a name: lower-case letters and digits joined by underscores."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


@dataclass
class Evidence:
    """What became of a list of evidence ids: the record ids kept, and each repair or drop."""

    ids: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)   # "'D30:05' -> d30.5"
    dropped: list[str] = field(default_factory=list)    # "'D' (not a turn id)"


def resolve_evidence(raw: Any, turns: set[str]) -> Evidence:
    """Record ids for LoCoMo evidence (a dia_id, or a list of them), repaired where the
    intent is unambiguous and dropped otherwise.

    Repairs: several ids in one string ("D8:6; D9:17", "D22:21, D22:23"), a stray colon
    ("D:11:26"), leading zeros ("D30:05"). Dropped: anything that is not a turn id ("D",
    a number) and an id naming no turn of the conversation."""
    out = Evidence()
    items = raw if isinstance(raw, list) else [raw]
    for item in items:
        if not isinstance(item, str):
            out.dropped.append(f"{shown(item)} (not a dia_id)")
            continue
        pieces = [p for p in re.split(r"[;,\s]+", item.strip()) if p]
        if not pieces:
            out.dropped.append(f"{shown(item)} (not a dia_id)")
            continue
        for piece in pieces:
            m = LOOSE_ID.fullmatch(piece)
            if not m:
                out.dropped.append(f"{shown(piece)} (not a dia_id)")
                continue
            rid = turn_id(int(m.group(1)), int(m.group(2)))
            if rid not in turns:
                out.dropped.append(f"{shown(piece)} (names no turn)")
                continue
            if len(pieces) > 1 or piece != f"D{int(m.group(1))}:{int(m.group(2))}":
                out.repaired.append(f"{shown(item)} -> {rid}")
            if rid not in out.ids:
                out.ids.append(rid)
    return out


# --- reading -------------------------------------------------------------------------


@dataclass
class Conversation:
    """One conversation in the per-file layout's shape, with where it came from."""

    key: str            # the id the outputs are named by (locomo-<key>)
    where: str          # file, and the sample within it, for messages
    data: dict          # speaker_a, session_N..., and session_N_observation/_summary, qa


def _conversation_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", re.sub(r"^conv-", "", name.lower())).strip("-")


def read_conversations(path: Path) -> list[Conversation]:
    """Every conversation under `path` (a file of either layout, or a folder of them),
    or GardenError listing every problem found, each located."""
    conversations, problems = _read_all(Path(path))
    if problems:
        raise GardenError(problems)
    return conversations


def _read_all(path: Path) -> tuple[list[Conversation], list[str]]:
    """(the conversations that read, every located problem of the ones that did not)."""
    if path.is_dir():
        files = sorted(p for p in path.glob("*.json") if p.is_file())
        if not files:
            raise GardenError(f"{path}: no .json files in this folder")
    elif path.is_file():
        files = [path]
    else:
        raise GardenError(f"{path}: no such file or folder")
    problems: list[str] = []
    conversations: list[Conversation] = []
    for file in files:
        try:
            data = _read_json(file)
        except GardenError as exc:
            problems += exc.messages
            continue
        if isinstance(data, dict):
            conversations.append(Conversation(_conversation_key(file.stem), str(file), data))
        elif isinstance(data, list):
            for n, sample in enumerate(data):
                where = f"{file}: sample #{n}"
                if not isinstance(sample, dict):
                    problems.append(f"{where}: must be an object with sample_id and conversation "
                                    f"(value {shown(sample)})")
                    continue
                flat, bad = _flatten_sample(sample, where)
                problems += bad
                if flat is not None:
                    conversations.append(Conversation(_conversation_key(sample["sample_id"]),
                                                      f"{file}: sample {shown(sample['sample_id'])}", flat))
        else:
            problems.append(f"{file}: must be a conversation object or a list of samples "
                            f"(value {shown(data)})")
    seen: dict[str, str] = {}
    for conv in conversations:
        if not conv.key:
            problems.append(f"{conv.where}: its name gives an empty story id")
        elif conv.key in seen:
            problems.append(f"{conv.where}: story id locomo-{conv.key} already taken by {seen[conv.key]}")
        else:
            seen[conv.key] = conv.where
    return conversations, problems


def _read_json(file: Path) -> Any:
    try:
        text = read_regular(file, MAX_JSON_BYTES).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GardenError(f"{file}: cannot read: not UTF-8 text (byte {exc.start + 1})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise GardenError(f"{file}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    except RecursionError:
        raise GardenError(f"{file}: not JSON this reader accepts: nested too deeply") from None


def _flatten_sample(sample: dict, where: str) -> tuple[dict | None, list[str]]:
    """A locomo10.json sample in the per-file layout's shape (the same fields, nested)."""
    problems = []
    for key in ("sample_id", "conversation", "qa"):
        if key not in sample:
            problems.append(f"{where}: field {key}: required field is missing")
    if "sample_id" in sample and not isinstance(sample["sample_id"], str):
        problems.append(f"{where}: field sample_id: must be a string (value {shown(sample['sample_id'])})")
    flat: dict = {}
    for key in ("conversation", "observation", "session_summary"):
        value = sample.get(key, {})
        if not isinstance(value, dict):
            problems.append(f"{where}: field {key}: must be an object (value {shown(value)})")
        else:
            flat.update(value)
    if problems:
        return None, problems
    flat["qa"] = sample["qa"]
    return flat, []


# --- building ------------------------------------------------------------------------


@dataclass
class Imported:
    """One conversation, built: the story, its cases, and what the import had to do."""

    key: str
    where: str
    story: dict
    cases: dict[str, dict]
    turns: int = 0
    observations: int = 0
    summaries: int = 0
    repaired: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"locomo-{self.key}"

    def summary_line(self) -> str:
        return (f"{self.name}: {self.turns} turns, {self.observations} observations, {self.summaries} summaries, "
                f"{len(self.cases)} questions; evidence ids repaired {len(self.repaired)}, "
                f"dropped {len(self.dropped)}")


def build(conv: Conversation) -> Imported:
    """The story and cases of one conversation, or GardenError with every problem located."""
    d, where = conv.data, conv.where
    problems: list[str] = []
    for key in ("speaker_a", "speaker_b", "qa"):
        if key not in d:
            problems.append(f"{where}: field {key}: required field is missing")
    speakers = [d[k] for k in ("speaker_a", "speaker_b") if isinstance(d.get(k), str) and d[k].strip()]
    for k in ("speaker_a", "speaker_b"):
        if k in d and not (isinstance(d[k], str) and d[k].strip()):
            problems.append(f"{where}: field {k}: must be a name (value {shown(d[k])})")
    sessions = sorted((int(m.group(1)), k) for k in d if (m := SESSION_KEY.fullmatch(k)))
    if not sessions:
        problems.append(f"{where}: no session_N field: a conversation needs at least one session of turns")
    dates: dict[int, dt.date] = {}
    stamps: dict[int, str] = {}
    for n, key in sessions:
        stamp = d.get(f"{key}_date_time")
        if stamp is None:
            problems.append(f"{where}: field {key}_date_time: required field is missing")
        elif (date := parse_date_time(stamp)) is None:
            problems.append(f"{where}: field {key}_date_time: not a date like '1:56 pm on 8 May, 2023' "
                            f"(value {shown(stamp)})")
        else:
            dates[n], stamps[n] = date, stamp.strip()
        if not isinstance(d[key], list):
            problems.append(f"{where}: field {key}: must be a list of turns (value {shown(d[key])})")

    # turns, checked before anything refers to them
    turns: list[tuple[int, str, dict]] = []   # (session, record id, turn)
    ids: set[str] = set()
    names = list(speakers)
    for n, key in sessions:
        for i, turn in enumerate(d[key] if isinstance(d[key], list) else []):
            at = f"{where}: {key}[{i}]"
            if not isinstance(turn, dict):
                problems.append(f"{at}: a turn must be an object (value {shown(turn)})")
                continue
            for fld in ("speaker", "dia_id", "text"):
                if fld not in turn:
                    problems.append(f"{at}: field {fld}: required field is missing")
                elif not isinstance(turn[fld], str):
                    problems.append(f"{at}: field {fld}: must be a string (value {shown(turn[fld])})")
            caption = turn.get("blip_caption")
            if caption is not None and not isinstance(caption, str):
                problems.append(f"{at}: field blip_caption: must be a string (value {shown(caption)})")
            dia = turn.get("dia_id")
            if not isinstance(dia, str) or not isinstance(turn.get("speaker"), str):
                continue
            m = DIA_ID.fullmatch(dia.strip())
            if not m:
                problems.append(f"{at}: field dia_id: not a turn id like 'D1:3' (value {shown(dia)})")
                continue
            rid = turn_id(int(m.group(1)), int(m.group(2)))
            if rid in ids:
                problems.append(f"{at}: field dia_id: turn {shown(dia)} appears twice")
                continue
            ids.add(rid)
            if not turn["speaker"].strip():
                problems.append(f"{at}: field speaker: must be a name (value {shown(turn['speaker'])})")
                continue
            if turn["speaker"] not in names:
                names.append(turn["speaker"])
            turns.append((n, rid, turn))

    observations: list[tuple[int, str, list]] = []   # (session, speaker, [fact, evidence])
    summaries: list[tuple[int, str]] = []
    for n, key in sessions:
        obs = d.get(f"{key}_observation")
        if obs is not None:
            if not isinstance(obs, dict):
                problems.append(f"{where}: field {key}_observation: must be an object of speaker: "
                                f"[[fact, evidence]...] (value {shown(obs)})")
                obs = {}
            for name in sorted(obs):
                facts = obs[name]
                if not isinstance(facts, list):
                    problems.append(f"{where}: field {key}_observation.{name}: must be a list (value {shown(facts)})")
                    continue
                for j, item in enumerate(facts):
                    if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                            and item[0].strip()):
                        problems.append(f"{where}: field {key}_observation.{name}[{j}]: must be "
                                        f"[fact, evidence] (value {shown(item)})")
                        continue
                    if not name.strip():
                        problems.append(f"{where}: field {key}_observation: a speaker key must be a name "
                                        f"(value {shown(name)})")
                        continue
                    if name not in names:
                        names.append(name)
                    observations.append((n, name, item))
        text = d.get(f"{key}_summary")
        if text is not None:
            if not isinstance(text, str):
                problems.append(f"{where}: field {key}_summary: must be a string (value {shown(text)})")
            elif text.strip():
                summaries.append((n, text.strip()))
    qa = d.get("qa", [])
    if not isinstance(qa, list):
        problems.append(f"{where}: field qa: must be a list of questions (value {shown(qa)})")
        qa = []
    for j, q in enumerate(qa):
        at = f"{where}: qa[{j}]"
        if not isinstance(q, dict):
            problems.append(f"{at}: a question must be an object (value {shown(q)})")
            continue
        if not (isinstance(q.get("question"), str) and q["question"].strip()):
            problems.append(f"{at}: field question: must be non-blank text (value {shown(q.get('question'))})")
        if "evidence" not in q:
            problems.append(f"{at}: field evidence: required field is missing")
        cat = q.get("category")
        if isinstance(cat, bool) or not isinstance(cat, int):
            problems.append(f"{at}: field category: must be a whole number (value {shown(cat)})")
    if problems:
        raise GardenError(problems)

    entities: dict[str, dict] = {}
    entity_of: dict[str, str] = {}
    for name in names:
        base = slug(name) or "speaker"
        eid, k = base, 2
        while eid in entities:
            eid, k = f"{base}_{k}", k + 1
        entities[eid] = {"name": name, "aliases": [name]}
        entity_of[name] = eid

    result = Imported(conv.key, where, {}, {})
    # records in reading order: each session's turns, then its observations, then its summary
    by_session: dict[int, list[dict]] = {n: [] for n, _ in sessions}
    members: dict[int, list[str]] = {n: [] for n, _ in sessions}
    for n, rid, turn in turns:
        text = f"{turn['speaker']}: {turn['text'].strip()}"
        if (turn.get("blip_caption") or "").strip():
            text += f" [shared a photo: {turn['blip_caption'].strip()}]"
        by_session[n].append({"id": rid, "kind": "source", "at": dates[n], "title": f"Session {n}, {stamps[n]}",
                              "text": text, "speaker": entity_of[turn["speaker"]]})
        members[n].append(rid)
    result.turns = len(turns)
    counters: dict[tuple[int, str], int] = {}
    for n, name, (fact, evidence) in observations:
        ev = resolve_evidence(evidence, ids)
        eid = entity_of[name]
        counters[(n, eid)] = counters.get((n, eid), 0) + 1
        rid = f"obs.s{n}.{eid.replace('_', '-')}.{counters[(n, eid)]}"
        result.repaired += [f"{rid}: {r}" for r in ev.repaired]
        result.dropped += [f"{rid}: {r}" for r in ev.dropped]
        record = {"id": rid, "kind": "note", "fidelity": "summary", "at": dates[n],
                  "title": f"Observation, session {n}, {stamps[n]}", "text": fact.strip(), "entities": [eid]}
        if ev.ids:
            record["sources"] = ev.ids
        by_session[n].append(record)
    result.observations = len(observations)
    for n, text in summaries:
        record = {"id": f"summary.s{n}", "kind": "view", "fidelity": "summary", "at": dates[n],
                  "title": f"Summary of session {n}, {stamps[n]}", "text": text,
                  "entities": sorted({entity_of[t["speaker"]] for s, _, t in turns if s == n})}
        if members[n]:
            record["sources"] = members[n]
        by_session[n].append(record)
    result.summaries = len(summaries)
    records = [r for n in sorted(by_session) for r in by_session[n]]
    name = result.name
    result.story = {
        "story": name,
        "title": f"LoCoMo conversation {conv.key}: {' and '.join(speakers)}",
        "about": (f"Imported from {CITATION}. {len(sessions)} sessions, {result.turns} turns, "
                  f"{result.observations} observations, {result.summaries} session summaries."),
        "project": name,
        "entities": {k: entities[k] for k in sorted(entities)},
        "records": records,
    }
    as_of = max(dates.values())
    width = max(3, len(str(len(qa))))
    for j, q in enumerate(qa):
        cid = f"q{j + 1:0{width}d}"
        ev = resolve_evidence(q["evidence"], ids)
        result.repaired += [f"{cid}: {r}" for r in ev.repaired]
        result.dropped += [f"{cid}: {r}" for r in ev.dropped]
        cat = q["category"]
        label = f"locomo category {cat}" + (f" ({CATEGORIES[cat]})" if cat in CATEGORIES else "")
        if "adversarial_answer" in q:
            answer = f"; adversarial answer (what a careless memory would say): {q['adversarial_answer']}"
        else:
            answer = f"; answer: {q['answer']}" if "answer" in q else ""
        case: dict = {
            "id": cid, "story": f"../../fixtures/{name}.yaml",
            "about": f"LoCoMo question {j + 1} of conversation {conv.key}{answer}",
            "origin": f"{CITATION}, conversation {conv.key}, qa[{j}]",
            "category": label, "as_of": as_of, "query": q["question"].strip(),
        }
        if ev.ids:
            case["expect"] = {"include": ev.ids}
        result.cases[cid] = case
    _validate(result)
    return result


def _validate(result: Imported) -> None:
    """The outputs validated by the models `garden check` and `garden run` use, so an
    import that succeeds writes only files those commands accept."""
    problems: list[str] = []
    fixture = Path(STORY_FOLDER) / f"{result.name}.yaml"
    try:
        story = Story.model_validate(result.story)
        problems += semantic_errors(story, fixture)
    except ValidationError as exc:
        problems += [f"{result.where}: story field {'%s: %s' % describe_pydantic_error(e)}" for e in exc.errors()]
    for cid, case in result.cases.items():
        try:
            Case.model_validate(case)
        except ValidationError as exc:
            problems += [f"{result.where}: {cid}: field {'%s: %s' % describe_pydantic_error(e)}"
                         for e in exc.errors()]
    if problems:
        raise GardenError(problems)


# --- writing -------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Writes a shared value (every turn of a session shares one date object) in full each
    time: anchors and aliases would make the file depend on object identity, and the
    story reader counts alias expansion against its bound."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_yaml(data: Any) -> str:
    """Stable YAML: keys in the order built (fixed by the importer), Unicode kept, no
    line folding, so the same input always gives the same bytes."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1_000_000,
                     default_flow_style=False)


@dataclass
class ImportReport:
    conversations: list[Imported]
    written: list[Path]

    def lines(self) -> list[str]:
        out = []
        for conv in self.conversations:
            out.append(conv.summary_line())
            out += [f"  repaired {r}" for r in conv.repaired]
            out += [f"  dropped {r}" for r in conv.dropped]
        return out

    def to_json(self) -> dict:
        return {"conversations": [{"story": c.name, "turns": c.turns, "observations": c.observations,
                                   "summaries": c.summaries, "questions": len(c.cases),
                                   "repaired": c.repaired, "dropped": c.dropped} for c in self.conversations],
                "written": [str(p) for p in self.written]}


def import_locomo(path: str | Path, out: str | Path = ".") -> ImportReport:
    """Read LoCoMo conversations from `path` and write, under `out`, each one's story
    (`fixtures/locomo-<id>.yaml`) and cases (`cases/locomo-<id>/qNNN.yaml`).

    Everything is read, built and validated first; the files are then written to a
    temporary folder inside `out` and moved into place, so bad input writes nothing.
    A conversation's earlier case folder is replaced whole, so a question removed from
    the data leaves no stale case behind."""
    out = Path(out)
    # every file read and every conversation that reads built before anything is refused,
    # so one run lists every problem of every kind, not the first kind found
    conversations, problems = _read_all(Path(path))
    built: list[Imported] = []
    for conv in counted(conversations, Progress("import: building", total=len(conversations), unit="conversations")):
        try:
            built.append(build(conv))
        except GardenError as exc:
            problems += exc.messages
    if out.exists() and not out.is_dir():
        problems.append(f"{out}: `out` must be a folder (it is a file)")
    for sub in (STORY_FOLDER, CASES_FOLDER):
        if (out / sub).exists() and not (out / sub).is_dir():
            problems.append(f"{out / sub}: must be a folder (it is a file)")
    if problems:
        raise GardenError(problems)
    rendered = [(conv, dump_yaml(conv.story)) for conv in built]
    for conv, text in rendered:
        if len(text.encode("utf-8")) > MAX_FILE_BYTES:
            problems.append(f"{conv.where}: the story would be {len(text.encode('utf-8')):,} bytes, past the "
                            f"{MAX_FILE_BYTES:,} a story file may hold")
    if problems:
        raise GardenError(problems)
    try:
        out.mkdir(parents=True, exist_ok=True)
        written = _write(out, rendered)
    except OSError as exc:
        raise GardenError(f"{out}: cannot write: {exc.strerror or exc}") from None
    return ImportReport(built, written)


def _write(out: Path, rendered: list[tuple[Imported, str]]) -> list[Path]:
    staging = staging_folder(out, "locomo")
    try:
        for conv, text in rendered:
            (staging / STORY_FOLDER).mkdir(exist_ok=True)
            (staging / STORY_FOLDER / f"{conv.name}.yaml").write_text(text, encoding="utf-8")
            folder = staging / CASES_FOLDER / conv.name
            folder.mkdir(parents=True)
            for cid, case in conv.cases.items():
                (folder / f"{cid}.yaml").write_text(dump_yaml(case), encoding="utf-8")
        return move_staged(out, staging, [conv.name for conv, _ in rendered], ".yaml")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
