"""`garden import longmemeval`: LongMemEval questions as garden stories and cases.

LongMemEval (Wu et al., ICLR 2025, "LongMemEval: Benchmarking Chat Assistants on
Long-Term Interactive Memory"; MIT) is a public benchmark of a user's chats with an
assistant. Each question comes with its own haystack of chat sessions, some of which hold
the answer. The files are JSON lists of question records (`longmemeval_oracle.json`,
`longmemeval_s.json`, `longmemeval_m.json` and their `_cleaned` versions, also gzipped).
The M file is 2.7 GB, so the list is read one record at a time (`iter_json_list`):
memory holds one question record, never the file.

Mapping, per question:

- the question becomes a story `longmemeval-<question id>` (a JSON Lines file, since a
  haystack can be larger than the YAML reader's bound) with two entities, `user` and
  `assistant`, the assistant its `addressee` (a question's "you": "what did you suggest?");
- each turn of its haystack becomes a `source` record `<session id>.<turn number from 1>`.
  Its text is the turn's content as released, its `speaker` the role, its `at` the
  session's date. Its title is `Session <digest>`, where the digest is the first 12 hex
  digits of the sha256 of the session id. The turns of one session share a title and a
  date, which makes them neighbours. The title leaves out the raw id, because evidence
  session ids begin with `answer_`, which would put the gold label into the indexed text.
  It also leaves out the date, because a session repeated in many haystacks can have a
  different date in each, and the embedding cache is keyed by the indexed text;
- the question becomes a case `cases/longmemeval-<id>/<id>.yaml`: `as_of` its question
  date, `category` its question type, `expect.include` its evidence turns (the turns
  marked `has_answer` inside its evidence sessions, by either role). An abstention question
  (id ending `_abs`) gets `expect.unanswerable`. A question with neither gets an empty
  `expect` and is counted as unjudged. The case format has no field for session-level
  judgments, so the evidence sessions are listed in `about`, with the answer.

A session id in many haystacks gives the same record ids and texts in every story that
holds it, so its turns are embedded once. The report counts distinct sessions against
slots. Quirks of the released files are handled and counted, never fatal: a session
repeated inside one haystack is kept once; a turn with blank content is left out (its
number is kept, so ids stay stable); a lone surrogate escape is replaced by U+FFFD;
evidence sessions missing from the haystack and `has_answer` turns outside evidence
sessions are counted. Input that is not LongMemEval (not JSON, the wrong shape, a missing
or mistyped field, an unknown role, a date that does not parse) is bad input. Each problem
is one located line (file, question number and id, field). Up to MAX_PROBLEMS are listed
and the rest counted. Nothing is written.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import random
import re
import shutil
from collections import Counter
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterator

from pydantic import ValidationError

from garden.formats.layout import CASES_FOLDER, STORY_FOLDER
from garden.errors import GardenError
from garden.formats._staged import move_staged, staging_folder
from garden.formats.json_stream import CHUNK_CHARS, iter_json_list, open_text
from garden.formats.jsonl_reader import MAX_LINE_BYTES, SUFFIX
from garden.formats.locomo import dump_yaml
from garden.formats.stories import semantic_errors
from garden.formats.yaml_reader import MAX_FILE_BYTES, describe_pydantic_error
from garden.models import SURROGATE, Story
from garden.formats.cases import Case
from garden._terminal import Progress, counted
from garden.text import shown, shown_id

CITATION = ('LongMemEval (Wu et al., ICLR 2025, "LongMemEval: Benchmarking Chat Assistants on Long-Term '
            'Interactive Memory"; MIT)')
QUESTION_TYPES = ("single-session-user", "single-session-assistant", "single-session-preference",
                  "multi-session", "temporal-reasoning", "knowledge-update")
ROLES = ("user", "assistant")
FIELDS = ("question_id", "question_type", "question", "answer", "question_date", "haystack_session_ids",
          "haystack_dates", "haystack_sessions", "answer_session_ids")
ABSTENTION_SUFFIX = "_abs"
PREFIX = "longmemeval-"

MAX_PROBLEMS = 50                     # problems listed; the rest are counted
# A haystack's bounds, each well past the released files (S: about 50 sessions and 500 turns
# a haystack, 132 turns at most in a session of the development sample; M: about 500 sessions,
# some 5,000 turns): memory is bounded by one haystack, and one haystack by these.
MAX_SESSIONS = 5_000                  # sessions in one haystack
MAX_SESSION_TURNS = 1_000             # turns in one session
MAX_HAYSTACK_TURNS = 50_000           # turns in one haystack
# JSON values of one question record (a turn is four: its object, role, content, has_answer),
# counted before it is decoded, so a record of millions of empty turns builds nothing
MAX_VALUES = 8 * MAX_HAYSTACK_TURNS + 8 * MAX_SESSIONS + 1_000
BOUNDS = (f" (a haystack holds at most {MAX_SESSIONS:,} sessions, {MAX_SESSION_TURNS:,} turns in a session and "
          f"{MAX_HAYSTACK_TURNS:,} in all)")
MAX_ID_CHARS = 256                    # a question or session id; the released ones are under 40
SLUG_CHARS = 64                       # an id longer than this, or not already a slug, is shortened and hashed

# "2023/05/30 (Tue) 23:40". The weekday is read but not checked against the date.
DATE = re.compile(r"\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\((Mon|Tue|Wed|Thu|Fri|Sat|Sun)\))?\s*"
                  r"(?:(\d{1,2}):(\d{2}))?\s*", re.IGNORECASE)
DATE_EXAMPLE = "2023/05/30 (Tue) 23:40"
_CLEAN_ID = re.compile(r"[a-z0-9_-]+")


# --- parsing -------------------------------------------------------------------------


def parse_date(text: Any) -> dt.datetime | None:
    """The moment of a LongMemEval stamp such as "2023/05/30 (Tue) 23:40", or None."""
    if not isinstance(text, str) or len(text) > 100:
        return None
    m = DATE.fullmatch(text)
    if not m:
        return None
    hour, minute = (int(m.group(5)), int(m.group(6))) if m.group(5) else (0, 0)
    try:
        return dt.datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), hour, minute)
    except ValueError:
        return None


def slug(raw: str) -> str:
    """A garden id made from a LongMemEval id, the same for the same id in every story.

    An id already made of lower-case letters, digits, `_` and `-`, and at most SLUG_CHARS
    long, is kept as it is. Any other id is lower-cased, shortened and given 8 hex digits
    of its sha256 (`sharegpt_yywfNhy_0` becomes `sharegpt_yywfnhy_0-<hash>`). The digest
    keeps ids apart that differ only in case. A slug never holds a dot, so in a record id
    the session is everything before the last dot."""
    if len(raw) <= SLUG_CHARS and _CLEAN_ID.fullmatch(raw):
        return raw
    base = re.sub(r"[^a-z0-9_-]+", "-", raw.lower()).strip("-_")[:SLUG_CHARS - 9].strip("-_")
    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{base}-{digest}" if base else f"id-{digest}"


def session_title(session_id: str) -> str:
    """The title every turn of a session carries: the same in every haystack, and free of
    the id's own words (an evidence session's id begins with `answer_`)."""
    return f"Session {hashlib.sha256(session_id.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"


def _clean(text: str) -> tuple[str, bool]:
    """`text` with each lone surrogate (an escape like \\ud83d with no partner, which no
    UTF-8 file can hold) replaced by U+FFFD, and whether any was."""
    if SURROGATE.search(text) is None:
        return text, False
    return SURROGATE.sub("\ufffd", text), True


def read_questions(path: str | Path, chunk_chars: int = CHUNK_CHARS) -> Iterator[tuple[int, Any, list[str]]]:
    """Every element of a LongMemEval file, streamed (see `iter_json_list`)."""
    path = Path(path)
    with open_text(path) as fh:
        yield from iter_json_list(fh, str(path), chunk_chars, max_values=MAX_VALUES, values_hint=BOUNDS)


# --- checking ------------------------------------------------------------------------


def _where(file: str, index: int, q: Any) -> str:
    qid = q.get("question_id") if isinstance(q, dict) else None
    if isinstance(qid, str) and qid.strip():
        return f"{file}: question #{index} ({shown_id(qid)})"
    return f"{file}: question #{index}"


def _is_id(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip()) and len(value) <= MAX_ID_CHARS


def _id_problem(where: str, name: str, value: Any) -> str:
    return (f"{where}: field {name}: must be a non-blank string of at most {MAX_ID_CHARS} characters "
            f"(value {shown(value)})")


def check_question(q: Any, where: str) -> list[str]:
    """Every problem of one question record, each a located line; [] when it can be built."""
    if not isinstance(q, dict):
        return [f"{where}: must be an object with {', '.join(FIELDS)} (value {shown(q)})"]
    out = [f"{where}: field {key}: required field is missing" for key in FIELDS if key not in q]
    if "question_id" in q and not _is_id(q["question_id"]):
        out.append(_id_problem(where, "question_id", q["question_id"]))
    qtype = q.get("question_type")
    if "question_type" in q and not (isinstance(qtype, str) and qtype in QUESTION_TYPES):
        out.append(f"{where}: field question_type: must be one of {', '.join(QUESTION_TYPES)} "
                   f"(value {shown(qtype)})")
    if "question" in q and not (isinstance(q["question"], str) and q["question"].strip()):
        out.append(f"{where}: field question: must be non-blank text (value {shown(q['question'])})")
    answer = q.get("answer")
    if "answer" in q and not (isinstance(answer, str) or (
            isinstance(answer, (int, float)) and not isinstance(answer, bool) and math.isfinite(answer))):
        out.append(f"{where}: field answer: must be a string or a number (value {shown(answer)})")
    if "question_date" in q and parse_date(q["question_date"]) is None:
        out.append(f"{where}: field question_date: not a date like {DATE_EXAMPLE!r} "
                   f"(value {shown(q['question_date'])})")

    ids, dates, sessions = (q.get(k) for k in ("haystack_session_ids", "haystack_dates", "haystack_sessions"))
    for key, value in (("haystack_session_ids", ids), ("haystack_dates", dates),
                       ("haystack_sessions", sessions), ("answer_session_ids", q.get("answer_session_ids"))):
        if key in q and not isinstance(value, list):
            out.append(f"{where}: field {key}: must be a list (value {shown(value)})")
    if isinstance(ids, list):
        out += [_id_problem(where, f"haystack_session_ids[{i}]", v) for i, v in enumerate(ids) if not _is_id(v)]
    if isinstance(q.get("answer_session_ids"), list):
        out += [_id_problem(where, f"answer_session_ids[{i}]", v)
                for i, v in enumerate(q["answer_session_ids"]) if not _is_id(v)]
    if isinstance(dates, list):
        out += [f"{where}: field haystack_dates[{i}]: not a date like {DATE_EXAMPLE!r} (value {shown(v)})"
                for i, v in enumerate(dates) if parse_date(v) is None]
    if isinstance(sessions, list) and len(sessions) > MAX_SESSIONS:
        out.append(f"{where}: field haystack_sessions: {len(sessions):,} sessions, past the {MAX_SESSIONS:,} a "
                   f"haystack may hold{BOUNDS}")
    elif isinstance(sessions, list):
        turns = 0
        for i, session in enumerate(sessions):
            at = f"{where}: field haystack_sessions[{i}]"
            if not isinstance(session, list):
                out.append(f"{at}: a session must be a list of turns (value {shown(session)})")
                continue
            if len(session) > MAX_SESSION_TURNS:
                out.append(f"{at}: {len(session):,} turns, past the {MAX_SESSION_TURNS:,} a session may hold")
                continue
            turns += len(session)
            for j, turn in enumerate(session):
                out += _turn_problems(f"{at}[{j}]", turn)
        if turns > MAX_HAYSTACK_TURNS:
            out.append(f"{where}: field haystack_sessions: {turns:,} turns, past the {MAX_HAYSTACK_TURNS:,} a "
                       f"haystack may hold{BOUNDS}")
    if isinstance(ids, list):
        for key, value, noun in (("haystack_dates", dates, "dates"), ("haystack_sessions", sessions, "sessions")):
            if isinstance(value, list) and len(value) != len(ids):
                out.append(f"{where}: field {key}: {len(value)} {noun} for {len(ids)} session ids in "
                           f"haystack_session_ids; the lists are parallel")
    return out


def _turn_problems(at: str, turn: Any) -> list[str]:
    if not isinstance(turn, dict):
        return [f"{at}: a turn must be an object with role and content (value {shown(turn)})"]
    out = []
    for key in ("role", "content"):
        if key not in turn:
            out.append(f"{at}.{key}: required field is missing")
    if "role" in turn and not (isinstance(turn["role"], str) and turn["role"] in ROLES):
        out.append(f"{at}.role: must be 'user' or 'assistant' (value {shown(turn['role'])})")
    if "content" in turn and not isinstance(turn["content"], str):
        out.append(f"{at}.content: must be a string (value {shown(turn['content'])})")
    if turn.get("has_answer") is not None and not isinstance(turn["has_answer"], bool):
        out.append(f"{at}.has_answer: must be true or false (value {shown(turn['has_answer'])})")
    return out


# --- building ------------------------------------------------------------------------


@dataclass
class Quirks:
    """What a build met in the released files and handled (counted in the report, never fatal)."""

    repeated_in_haystack: int = 0   # a session repeated inside one haystack, kept once
    blank_turns: int = 0            # turns with blank content, left out
    blank_evidence: int = 0         # of them, marked has_answer in an evidence session
    marked_outside: int = 0         # has_answer turns outside the evidence sessions
    evidence_missing: int = 0       # evidence sessions missing from their haystack
    after_question: int = 0         # session slots dated after their question
    replaced: int = 0               # texts with a lone surrogate escape

    def add(self, other: "Quirks") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class Built:
    """One question, built and validated: the bytes to write and what the build found."""

    qid: str
    qtype: str
    key: str                 # the slug: the case id, and the story is longmemeval-<key>
    where: str
    story_bytes: bytes
    case_text: str
    abstention: bool = False
    evidence: list[str] = field(default_factory=list)
    assistant_evidence: int = 0
    sessions: dict[str, bytes] = field(default_factory=dict)   # session id -> digest of its turns
    story: Story | None = None          # the validated story, as `garden run` would load it
    case: dict = field(default_factory=dict)
    slots: int = 0
    turns: int = 0
    quirks: Quirks = field(default_factory=Quirks)

    @property
    def name(self) -> str:
        return f"{PREFIX}{self.key}"

    @property
    def unjudged(self) -> bool:
        return not self.abstention and not self.evidence


def _json_line(value: dict) -> bytes:
    return (json.dumps(value, ensure_ascii=False) + "\n").encode("utf-8")


def build(q: dict, where: str, label: str) -> Built:
    """The story and case of one checked question (`check_question` found nothing), or
    GardenError with every problem located. `label` names the file in `origin`."""
    qid_raw, qtype = q["question_id"], q["question_type"]
    qid, replaced = _clean(qid_raw)
    key = slug(qid_raw)
    asked = parse_date(q["question_date"])
    result = Built(qid_raw, qtype, key, where, b"", "", abstention=qid_raw.endswith(ABSTENTION_SUFFIX))
    result.quirks.replaced += replaced
    evidence_sessions = list(dict.fromkeys(q["answer_session_ids"]))
    evidence_set = set(evidence_sessions)
    problems: list[str] = []
    records: list[bytes] = []
    values: list[dict] = []
    seen_here: set[str] = set()
    for i, (sid, stamp, session) in enumerate(zip(q["haystack_session_ids"], q["haystack_dates"],
                                                  q["haystack_sessions"])):
        result.slots += 1
        if sid in seen_here:
            result.quirks.repeated_in_haystack += 1
            continue
        seen_here.add(sid)
        when = parse_date(stamp)
        if when.date() > asked.date():
            result.quirks.after_question += 1
        at, title, prefix = when.date().isoformat(), session_title(sid), slug(sid)
        digest = hashlib.blake2b(digest_size=16)
        is_evidence = sid in evidence_set
        for j, turn in enumerate(session, start=1):
            content, role = turn["content"], turn["role"]
            digest.update(f"{role}\0{len(content)}\0".encode())
            digest.update(content.encode("utf-8", "surrogatepass"))
            marked = turn.get("has_answer") is True
            if not content.strip():
                result.quirks.blank_turns += 1
                result.quirks.blank_evidence += marked and is_evidence
                continue
            text, bad = _clean(content)
            result.quirks.replaced += bad
            rid = f"{prefix}.{j}"
            record = {"id": rid, "kind": "source", "at": at, "title": title, "text": text, "speaker": role}
            line = _json_line(record)
            if len(line) > MAX_LINE_BYTES:
                problems.append(f"{where}: field haystack_sessions[{i}][{j - 1}].content: the turn would be a "
                                f"story line of {len(line):,} bytes, past the {MAX_LINE_BYTES:,} one line may hold")
                continue
            records.append(line)
            values.append(record)
            result.turns += 1
            if marked and is_evidence:
                result.evidence.append(rid)
                result.assistant_evidence += role == "assistant"
            elif marked:
                result.quirks.marked_outside += 1
        result.sessions[sid] = digest.digest()
    result.quirks.evidence_missing = sum(1 for sid in evidence_sessions if sid not in seen_here)
    if problems:
        raise GardenError(problems)

    name = result.name
    header = {
        "story": name,
        "title": f"LongMemEval question {qid} ({qtype})",
        "about": (f"Imported from {CITATION}: the haystack of question {qid} in {label}, "
                  f"{len(result.sessions)} sessions, {result.turns} turns. A turn is a source record "
                  "<session>.<turn number>; the turns of a session share its title and date."),
        "project": name,
        "addressee": "assistant",     # the question's "you" (garden/rerank/addressee.py)
        "entities": {"assistant": {"name": "assistant", "aliases": ["assistant"]},
                     "user": {"name": "user", "aliases": ["user"]}},
    }
    answer = q["answer"]
    answer_text, bad = _clean(answer) if isinstance(answer, str) else (json.dumps(answer), False)
    result.quirks.replaced += bad
    query, bad = _clean(q["question"].strip())
    result.quirks.replaced += bad
    shown_sessions = ", ".join(_clean(s)[0] for s in evidence_sessions) or "none"
    kind = "abstention question (no session answers it)" if result.abstention else "question"
    case: dict = {
        "id": key,
        "story": f"../../fixtures/{name}{SUFFIX}",
        "about": f"LongMemEval {qtype} {kind} {qid}; evidence sessions: {shown_sessions}; answer: {answer_text}",
        "origin": f"{CITATION}, {label}, question {qid}",
        "category": qtype,
        "as_of": asked.date(),
        "query": query,
        "expect": ({"unanswerable": True} if result.abstention
                   else {"include": list(result.evidence)} if result.evidence else {}),
    }
    result.story = _validate(result, header, values, case)
    result.case = case
    result.story_bytes = _json_line(header) + b"".join(records)
    result.case_text = dump_yaml(case)
    if len(result.case_text.encode("utf-8")) > MAX_FILE_BYTES:
        raise GardenError(f"{where}: the case would be {len(result.case_text.encode('utf-8')):,} bytes, past the "
                          f"{MAX_FILE_BYTES:,} a case file may hold")
    return result


def _validate(result: Built, header: dict, records: list[dict], case: dict) -> Story:
    """The outputs validated by the models `garden check` and `garden run` use, so an
    import that succeeds writes only files those commands accept; the story, validated."""
    problems: list[str] = []
    story = None
    fixture = Path(STORY_FOLDER) / f"{result.name}{SUFFIX}"
    try:
        story = Story.model_validate({**header, "records": records})
        problems += [f"{result.where}: {p}" for p in semantic_errors(story, fixture)]
    except ValidationError as exc:
        problems += [f"{result.where}: story field {'%s: %s' % describe_pydantic_error(e)}" for e in exc.errors()]
    try:
        Case.model_validate(case)
    except ValidationError as exc:
        problems += [f"{result.where}: case field {'%s: %s' % describe_pydantic_error(e)}" for e in exc.errors()]
    if problems:
        raise GardenError(problems)
    return story


# --- sampling ------------------------------------------------------------------------


def allocate(counts: dict[str, int], n: int) -> dict[str, int]:
    """How many questions of each type a sample of `n` takes: proportional to the type's
    share (largest remainder), at least one of each type when `n` allows, never more than
    a type has. Ties go to the type first by name. Below one per type, the `n` largest types
    get one each."""
    total = sum(counts.values())
    types = sorted(t for t in counts if counts[t] > 0)
    if n >= total:
        return {t: counts[t] for t in types}
    if n < len(types):
        chosen = set(sorted(types, key=lambda t: (-counts[t], t))[:n])
        return {t: int(t in chosen) for t in types}
    quota = {t: Fraction(n * counts[t], total) for t in types}
    alloc = {t: min(counts[t], max(1, math.floor(quota[t]))) for t in types}
    while sum(alloc.values()) < n:
        t = min((t for t in types if alloc[t] < counts[t]), key=lambda t: (-(quota[t] - alloc[t]), t))
        alloc[t] += 1
    while sum(alloc.values()) > n:
        t = min((t for t in types if alloc[t] > 1), key=lambda t: (quota[t] - alloc[t], t))
        alloc[t] -= 1
    return alloc


def stratified_sample(keys: list[tuple[str, str]], n: int, seed: int) -> set[str]:
    """The question ids of a sample of `n` from (question id, type) pairs: `allocate` per
    type, then a seeded draw from the type's ids in sorted order. The same ids and seed give
    the same sample, in any file order, and each type draws from its own generator."""
    by_type: dict[str, list[str]] = {}
    for qid, qtype in keys:
        by_type.setdefault(qtype, []).append(qid)
    alloc = allocate({t: len(ids) for t, ids in by_type.items()}, n)
    chosen: set[str] = set()
    for qtype in sorted(by_type):
        ids = sorted(by_type[qtype])
        rng = random.Random(f"longmemeval-sample:{seed}:{qtype}")
        chosen.update(rng.sample(ids, alloc.get(qtype, 0)))
    return chosen


# --- the report ----------------------------------------------------------------------


@dataclass
class LongMemEvalReport:
    source: str
    read: Counter = field(default_factory=Counter)        # question type -> questions read
    imported: Counter = field(default_factory=Counter)    # question type -> questions imported
    abstention: int = 0
    unjudged: list[str] = field(default_factory=list)
    evidence_turns: int = 0
    assistant_evidence: int = 0
    slots: int = 0
    sessions: int = 0
    differing: int = 0             # session ids whose turns differ between haystacks
    turns: int = 0
    quirks: Quirks = field(default_factory=Quirks)
    sample: tuple[int, int] | None = None    # (N, seed)
    written: list[Path] = field(default_factory=list)

    @property
    def questions(self) -> int:
        return sum(self.imported.values())

    def lines(self) -> list[str]:
        read, imported = sum(self.read.values()), self.questions
        how = ""
        if self.sample:
            how = f" (a sample stratified by type: {self.sample[0]} questions, seed {self.sample[1]})"
        out = [f"{self.source}: {read} questions read, {imported} imported{how}"]
        for qtype in QUESTION_TYPES:
            if self.read[qtype]:
                out.append(f"  {qtype}: {self.imported[qtype]} of {self.read[qtype]}")
        out.append(f"abstention questions (expect unanswerable): {self.abstention}")
        unjudged = ""
        if self.unjudged:
            unjudged = ": " + ", ".join(shown_id(q) for q in self.unjudged[:10])
            unjudged += f", and {len(self.unjudged) - 10} more" if len(self.unjudged) > 10 else ""
        out.append(f"unjudged questions (no evidence turn, not abstention; written with an empty expect): "
                   f"{len(self.unjudged)}{unjudged}")
        out.append(f"evidence turns: {self.evidence_turns} ({self.assistant_evidence} of them the assistant's)")
        out.append(f"sessions: {self.sessions:,} distinct in {self.slots:,} slots, {self.turns:,} turns written; "
                   "a session's records are the same in every story that holds it")
        quirks = [
            (self.differing, "session ids whose turns differ between haystacks (each story keeps its own)"),
            (self.quirks.repeated_in_haystack, "sessions repeated inside one haystack, kept once"),
            (self.quirks.blank_turns, "turns with blank content, left out (their numbers kept)"),
            (self.quirks.blank_evidence, "of them marked has_answer in an evidence session, so not judged"),
            (self.quirks.marked_outside,
             "turns marked has_answer outside the question's evidence sessions, not judged"),
            (self.quirks.evidence_missing, "evidence sessions missing from their haystack"),
            (self.quirks.after_question, "session slots dated after their question (invisible at its as_of)"),
            (self.quirks.replaced, "texts with a lone surrogate escape, replaced by U+FFFD"),
        ]
        out += [f"  {count:,} {what}" for count, what in quirks if count]
        return out

    def to_json(self) -> dict:
        return {"source": self.source, "read": dict(self.read), "imported": dict(self.imported),
                "abstention": self.abstention, "unjudged": self.unjudged, "evidence_turns": self.evidence_turns,
                "assistant_evidence": self.assistant_evidence, "sessions": self.sessions, "slots": self.slots,
                "turns": self.turns, "differing": self.differing,
                **asdict(self.quirks), "sample": list(self.sample) if self.sample else None,
                "written": [str(p) for p in self.written]}


# --- importing -----------------------------------------------------------------------


class _Problems:
    """Located problem lines, the first MAX_PROBLEMS listed and the rest counted."""

    def __init__(self, where: str):
        self.where, self.listed, self.more = where, [], 0

    def extend(self, messages: list[str]) -> None:
        for message in messages:
            if len(self.listed) < MAX_PROBLEMS:
                self.listed.append(message)
            else:
                self.more += 1

    def __bool__(self) -> bool:
        return bool(self.listed)

    def error(self) -> GardenError:
        tail = [f"{self.where}: {self.more:,} more problems not listed"] if self.more else []
        return GardenError(self.listed + tail)


def _label(path: Path) -> str:
    """The file's name as outputs cite it: without `.gz`, so a file and its gzipped copy
    give the same bytes."""
    return path.name[:-3] if path.name.endswith(".gz") else path.name


def _scan(path: Path, problems: _Problems, report: LongMemEvalReport, chosen: set[str] | None,
          staging: Path | None, built_names: list[tuple[str, str]], chunk_chars: int,
          building: bool = False) -> list[tuple[str, str]]:
    """One pass over the file: every record checked; with `staging`, the ones in `chosen`
    (all, when None) built and written there while no problem is known; with `building`,
    built and counted but not kept. Returns the (question id, type) pairs of the records
    that checked."""
    file, label = str(path), _label(path)
    keys: list[tuple[str, str]] = []
    first_seen: dict[str, int] = {}
    slug_of: dict[str, str] = {}
    digests: dict[str, bytes] = {}
    try:
        questions = read_questions(path, chunk_chars)
        what = "import: building" if staging is not None else "reading"
        for index, q, dups in counted(questions, Progress(f"{what} {path.name}", unit="questions")):
            where = _where(file, index, q)
            bad = check_question(q, where) + [f"{where}: key {shown(k)} is written twice in one object" for k in dups]
            if bad:
                problems.extend(bad)
                continue
            qid = q["question_id"]
            if qid in first_seen:
                problems.extend([f"{where}: field question_id: {shown(qid)} is also question #{first_seen[qid]}"])
                continue
            first_seen[qid] = index
            key = slug(qid)
            if key in slug_of:
                problems.extend([f"{where}: field question_id: gives the story name {PREFIX}{key}, as "
                                 f"{shown(slug_of[key])} does"])
                continue
            slug_of[key] = qid
            keys.append((qid, q["question_type"]))
            if not (staging is not None or building) or (chosen is not None and qid not in chosen) or problems:
                continue
            try:
                built = build(q, where, label)
            except GardenError as exc:
                problems.extend(exc.messages)
                continue
            if staging is not None:
                _stage(staging, built)
                built_names.append((built.name, built.key))
            _count(report, built, digests)
    except GardenError as exc:
        problems.extend(exc.messages)
    return keys


def _count(report: LongMemEvalReport, built: Built, digests: dict[str, bytes]) -> None:
    report.imported[built.qtype] += 1
    report.abstention += built.abstention
    if built.unjudged:
        report.unjudged.append(built.qid)
    if not built.abstention:   # an abstention question's marked turns judge nothing
        report.evidence_turns += len(built.evidence)
        report.assistant_evidence += built.assistant_evidence
    report.slots += built.slots
    report.turns += built.turns
    for sid, digest in built.sessions.items():
        known = digests.setdefault(sid, digest)
        if known != digest:
            digests[sid] = b""      # counted once, however many haystacks differ
            report.differing += known != b""
    report.sessions = len(digests)
    report.quirks.add(built.quirks)


def _stage(staging: Path, built: Built) -> None:
    (staging / STORY_FOLDER / f"{built.name}{SUFFIX}").write_bytes(built.story_bytes)
    folder = staging / CASES_FOLDER / built.name
    folder.mkdir()
    (folder / f"{built.key}.yaml").write_text(built.case_text, encoding="utf-8")


def import_longmemeval(path: str | Path, out: str | Path = ".", sample: int | None = None, seed: int = 0,
                       chunk_chars: int = CHUNK_CHARS) -> LongMemEvalReport:
    """Read a LongMemEval file (`.json` or `.json.gz`) and write, under `out`, each
    question's story (`fixtures/longmemeval-<id>.jsonl`) and case
    (`cases/longmemeval-<id>/<id>.yaml`); with `sample`, only a sample of that many
    questions stratified by type, drawn with `seed`.

    The file is streamed. Without a sample it is read once, and each question is built,
    validated and written to a temporary folder inside `out`. With a sample, a first pass
    checks every record and draws the sample, and a second builds the chosen questions.
    Only when no problem was found anywhere are the files moved into place, each by a
    rename. Any problem leaves `out` as it was. A question's earlier case folder is replaced
    whole, and an earlier YAML form of its story is removed (a name looks for `.yaml` before
    `.jsonl`). Nothing else in `out` is touched."""
    path, out = Path(path), Path(out)
    if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int) or sample < 1):
        raise GardenError(f"`sample`: a sample is a whole number of questions, at least 1 (value {shown(sample)})")
    if not path.is_file():
        raise GardenError(f"{path}: no such file" if not path.exists() else
                          f"{path}: not a file; give the LongMemEval .json or .json.gz file")
    problems = _Problems(str(path))
    if out.exists() and not out.is_dir():
        problems.extend([f"{out}: `out` must be a folder (it is a file)"])
    for sub in (STORY_FOLDER, CASES_FOLDER):
        if (out / sub).exists() and not (out / sub).is_dir():
            problems.extend([f"{out / sub}: must be a folder (it is a file)"])
    if problems:
        raise problems.error()

    report = LongMemEvalReport(str(path), sample=(sample, seed) if sample is not None else None)
    chosen: set[str] | None = None
    if sample is not None:
        keys = _scan(path, problems, report, None, None, [], chunk_chars)
        if problems:
            raise problems.error()
        report.read.update(t for _, t in keys)
        chosen = stratified_sample(keys, sample, seed)

    created = [p for p in [out, *out.parents] if not p.exists()]
    try:
        out.mkdir(parents=True, exist_ok=True)
        staging = staging_folder(out, "longmemeval")
    except OSError as exc:
        _remove_created(created)
        raise GardenError(f"{out}: cannot write: {exc.strerror or exc}") from None
    built: list[tuple[str, str]] = []
    keys: list[tuple[str, str]] = []
    try:
        try:
            (staging / STORY_FOLDER).mkdir()
            (staging / CASES_FOLDER).mkdir()
            keys = _scan(path, problems, report, chosen, staging, built, chunk_chars)
        except OSError as exc:
            problems.extend([f"{out}: cannot write: {exc.strerror or exc}"])
        if sample is None:
            report.read.update(t for _, t in keys)
        for name, _ in built:
            target = out / STORY_FOLDER / f"{name}{SUFFIX}"
            if target.is_dir() and not target.is_symlink():
                problems.extend([f"{target}: is a folder; the story file goes there (move it away)"])
        if problems:
            raise problems.error()
        try:
            report.written = move_staged(out, staging, [name for name, _ in built], SUFFIX)
        except OSError as exc:
            raise GardenError(f"{out}: cannot write: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        _remove_created(created)
        raise
    shutil.rmtree(staging, ignore_errors=True)
    if not built:
        _remove_created(created)
    return report


def read_built(path: str | Path, chunk_chars: int = CHUNK_CHARS) -> tuple[LongMemEvalReport, Iterator[Built]]:
    """Every question of a LongMemEval file built as the import builds it, without writing
    anything: (what the file holds, the questions one at a time, in file order). A first
    pass checks and builds every record, so any problem raises here, located, before the
    first question is handed out; the second builds them again one at a time, so memory
    holds one question whatever the file's size."""
    path = Path(path)
    if not path.is_file():
        raise GardenError(f"{path}: no such file" if not path.exists() else
                          f"{path}: not a file; give the LongMemEval .json or .json.gz file")
    problems = _Problems(str(path))
    report = LongMemEvalReport(str(path))
    keys = _scan(path, problems, report, None, None, [], chunk_chars, building=True)
    if problems:
        raise problems.error()
    report.read.update(t for _, t in keys)
    if not keys:
        raise GardenError(f"{path}: holds no question")

    def questions() -> Iterator[Built]:
        file, label = str(path), _label(path)
        for index, q, _ in read_questions(path, chunk_chars):
            yield build(q, _where(file, index, q), label)

    return report, questions()


def _remove_created(created: list[Path]) -> None:
    """Remove the folders this import made, deepest first, each only if it is empty."""
    for folder in created:
        try:
            folder.rmdir()
        except OSError:
            return
