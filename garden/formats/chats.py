"""LoCoMo-layout chats in the forms a user may compare on beside the released one.

- `released`: as released (Maharana et al., ACL 2024, CC BY-NC 4.0), with the
  observations and session summaries the benchmark generated from each conversation;
- `raw`: the raw chat logs: turns and photo captions only (`raw_chat_logs`);
- `messages`: the messaging form (`messaging_form`): each turn of the raw logs sent as the
  messages a person would type.

The messaging form, turn by turn, in story order:

1. the turn's text is cut at sentence breaks (., ! or ? and the space after it);
2. a sentence of more than LONG_CLAUSE words is cut again at its clause breaks (a comma,
   semicolon, colon or dash followed by a conjunction, or a semicolon alone), the
   conjunction opening the next piece, as a person types "I went yesterday" / "and it was
   great";
3. a piece of fewer than SHORT words is sent with the next piece of the same turn (a
   lone "Wow," or "So" is not a message), the last short piece with the one before it;
4. a shared photo is a message of its own after the turn's words: its caption and no text.

A message keeps its turn's speaker and session; the messages of a session are numbered
afresh (`D<session>:<n>`), so the form is read by the same LoCoMo reader. The evidence:
a question's evidence turn is carried by those of its messages that share a content word
(the analyzer's stems, stopwords out) with the question's answer, or, none doing so, with
the question; a turn none of whose messages shares one keeps all its messages as
evidence (the turn is the evidence; which of its messages carries it is then unknown).
Category 5 questions, whose answer is what a careless memory would say, are read by their
question alone. Every choice is the same for every conversation; none reads a name.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable

from garden.errors import GardenError
from garden.text import one_line

FORMS = ("released", "raw", "messages")


GENERATED = re.compile(r"^(session_\d+_(observation|summary)|observation|session_summary|event_summary)$")
SESSION = re.compile(r"session_(\d+)")
SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=\S)")
CLAUSE_BREAK = re.compile(r"(?:[,;:]|\s[-\u2013\u2014])\s+(?=(?:and|but|so|because|though|although|since|which|"
                          r"while|or|plus|then)\b)|;\s+", re.IGNORECASE)
LONG_CLAUSE = 20    # words: a sentence longer than this is cut at its clause breaks
SHORT = 7           # words: a piece shorter than this goes with its neighbour


def holders(data) -> list[dict]:
    """The objects of a LoCoMo file that hold sessions or what was generated: the file
    itself and, in the released layout, its `conversation`."""
    return [h for h in (data, data.get("conversation") if isinstance(data, dict) else None) if isinstance(h, dict)]


def locomo_files(source: Path) -> list[Path]:
    """The LoCoMo files a source names: the file itself, or a folder's `.json` files."""
    source = Path(source)
    return [source] if source.is_file() else sorted(source.glob("*.json"))


def without_generated(data: dict) -> None:
    """What the benchmark generated from a conversation (its observations and session
    summaries) taken out of it: its turns are left."""
    for holder in holders(data):
        for key in [k for k in holder if GENERATED.match(k)]:
            del holder[key]


def _rewritten(source: Path, dest: Path, change: Callable[[dict], None]) -> Path:
    """Each LoCoMo file of `source` written into `dest` under its name, every conversation
    in it (a file holds one, or a list of them as locomo10.json does) without what was
    generated and then changed in place by `change`."""
    for path in locomo_files(source):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            conversations = data if isinstance(data, list) else [data]
            for conversation in conversations:
                without_generated(conversation)
                change(conversation)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:  # not JSON, or not LoCoMo's layout
            raise GardenError(f"{path}: not a LoCoMo file a chat form can be built from ({one_line(str(exc))})") \
                from None
        (Path(dest) / path.name).write_text(json.dumps(data), encoding="utf-8")
    return Path(dest)


def raw_chat_logs(source: Path, dest: Path) -> Path:
    """A copy of the LoCoMo files in `source` with what the benchmark generated from each
    conversation (its observations and session summaries) left out: turns only."""
    return _rewritten(source, dest, lambda conversation: None)


# --- the messaging form ------------------------------------------------------------------


def words(text: str) -> int:
    return len(text.split())


def clauses(sentence: str) -> list[str]:
    """A long sentence cut at its clause breaks (rule 2), the break's punctuation kept
    with the piece before it."""
    if words(sentence) <= LONG_CLAUSE:
        return [sentence]
    pieces, start = [], 0
    for m in CLAUSE_BREAK.finditer(sentence):
        pieces.append(sentence[start:m.start() + len(m.group(0).rstrip())].strip())
        start = m.end()
    pieces.append(sentence[start:].strip())
    return [p for p in pieces if p]


def merged(pieces: list[str]) -> list[str]:
    """Pieces of fewer than SHORT words sent with the next piece, the last with the one
    before it (rule 3)."""
    out: list[str] = []
    carry = ""
    for piece in pieces:
        piece = f"{carry} {piece}".strip() if carry else piece
        if words(piece) < SHORT:
            carry = piece
            continue
        out.append(piece)
        carry = ""
    if carry:
        if out:
            out[-1] = f"{out[-1]} {carry}"
        else:
            out.append(carry)
    return out


def split_turn(text: str) -> list[str]:
    """The messages a turn's text is typed as (rules 1-3)."""
    return merged([c for s in SENTENCE_BREAK.split(text.strip()) for c in clauses(s)])


def messages_of(turn: dict) -> list[dict]:
    """The messages of one turn, without their ids: its words, then its photo (rule 4)."""
    out = [{"speaker": turn["speaker"], "text": t} for t in split_turn(turn.get("text") or "")]
    caption = (turn.get("blip_caption") or "").strip()
    if caption:
        out.append({"speaker": turn["speaker"], "text": "", "blip_caption": caption})
    if not out:
        out.append({"speaker": turn["speaker"], "text": ""})
    return out


def content(text: str) -> set[str]:
    from garden.analyzer import analyze

    return set(analyze(text))


def carriers(messages: list[dict], answer: str, question: str) -> list[str]:
    """The ids of an evidence turn's messages that carry it (see the module docstring)."""
    for probe in (content(answer), content(question)):
        held = [m["dia_id"] for m in messages if probe & content(f"{m['text']} {m.get('blip_caption', '')}")]
        if held:
            return held
    return [m["dia_id"] for m in messages]


def messaging_conversation(holder: dict, qa: list) -> tuple[dict, list]:
    """One conversation's sessions as messages, and its questions with their evidence
    carried by messages."""
    from garden.formats.locomo import resolve_evidence, turn_id

    of_turn: dict[str, list[dict]] = {}
    for key in [k for k in holder if SESSION.fullmatch(k)]:
        n = int(SESSION.fullmatch(key).group(1))
        sent = []
        for turn in holder[key] if isinstance(holder[key], list) else []:
            mine = messages_of(turn)
            for m in mine:
                m["dia_id"] = f"D{n}:{len(sent) + 1}"
                sent.append(m)
            m_dia = re.fullmatch(r"D(\d+):(\d+)", str(turn.get("dia_id", "")).strip())
            if m_dia:
                of_turn[turn_id(int(m_dia.group(1)), int(m_dia.group(2)))] = mine
        holder[key] = sent
    questions = []
    for q in qa:
        answer = str(q.get("answer", "")) if "answer" in q else ""
        evidence = resolve_evidence(q.get("evidence", []), set(of_turn)).ids
        carried = [d for t in evidence for d in carriers(of_turn[t], answer, q.get("question", ""))]
        questions.append({**q, "evidence": carried})
    return holder, questions


def _as_messages(data: dict) -> None:
    chat = data["conversation"] if isinstance(data.get("conversation"), dict) else data
    _, data["qa"] = messaging_conversation(chat, data.get("qa", []))


def messaging_form(source: Path, dest: Path) -> Path:
    """A copy of the LoCoMo files in `source` as raw chat logs in the messaging form."""
    return _rewritten(source, dest, _as_messages)


def write_form(source: Path, dest: Path, form: str) -> Path:
    """The LoCoMo files of `source` (a file or a folder of them) written into `dest` in
    `form` (see FORMS); `dest` is made when missing."""
    if form not in FORMS[1:]:
        raise GardenError(f"`form` {form!r}: choose one of {', '.join(FORMS)}")
    if not locomo_files(source):
        raise GardenError(f"{source}: no LoCoMo .json file to write in the {form} form")
    Path(dest).mkdir(parents=True, exist_ok=True)
    return (raw_chat_logs if form == "raw" else messaging_form)(Path(source), Path(dest))
