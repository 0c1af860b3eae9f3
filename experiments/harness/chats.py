"""LoCoMo's conversations in three forms, the development kinds beside LongMemEval.

- `locomo`: as released (Maharana et al., ACL 2024, CC BY-NC 4.0), with the observations
  and session summaries the benchmark generated from each conversation;
- `locomo-raw`: the raw chat logs: turns and photo captions only (`raw_chat_logs`);
- `locomo-messages`: the messaging form (`messaging_form`): each turn of the raw logs sent
  as the messages a person would type.

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

`shape` gives the statistics a real chat is compared on (the median words of a message
and of an evidence message, bursts, replies to a question).
"""
from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

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


def raw_chat_logs(source: Path, dest: Path) -> Path:
    """A copy of the LoCoMo files in `source` with what the benchmark generated from each
    conversation (its observations and session summaries) left out: turns only."""
    for path in sorted(Path(source).glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for holder in holders(data):
            for key in [k for k in holder if GENERATED.match(k)]:
                del holder[key]
        (Path(dest) / path.name).write_text(json.dumps(data), encoding="utf-8")
    return Path(dest)


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


def messaging_form(source: Path, dest: Path) -> Path:
    """A copy of the LoCoMo files in `source` as raw chat logs in the messaging form."""
    for path in sorted(Path(source).glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for holder in holders(data):
            for key in [k for k in holder if GENERATED.match(k)]:
                del holder[key]
        chat = data["conversation"] if isinstance(data.get("conversation"), dict) else data
        _, data["qa"] = messaging_conversation(chat, data.get("qa", []))
        (Path(dest) / path.name).write_text(json.dumps(data), encoding="utf-8")
    return Path(dest)


# --- the shape -------------------------------------------------------------------------


def shape(conversations) -> dict:
    """The statistics a real chat is compared on, over conversations (garden stories with
    their judged questions): words of a message (its text, a photo's caption aside) and of
    an evidence message; bursts (a run of one speaker's messages in a session); the share
    of evidence messages that reply to a question (in the first burst after the other
    speaker's burst that ended with "?"), and of those the share sharing no content word
    with the question they reply to."""
    lengths, evidence_lengths, bursts, photos, messages = [], [], [], 0, 0
    replies = replies_without_words = evidence_total = 0
    for conv in conversations:
        story = conv.story
        evidence = {t for q in conv.questions for t in q.evidence}
        asked: str | None = None       # the question the current burst answers, if any
        prior: tuple | None = None     # (session, speaker) of the burst being read
        last_text = ""
        run = 0
        for r in story.records:
            if r.kind != "source":
                continue
            said = r.text.split(": ", 1)[1] if ": " in r.text else r.text
            photo = said.startswith("[shared a photo:") or said.startswith(" [shared a photo:")
            key = (r.title, r.speaker)
            if key != prior:
                if run:
                    bursts.append(run)
                same_session = prior is not None and prior[0] == r.title
                asked = last_text if same_session and last_text.rstrip().endswith("?") else None
                prior, run = key, 0
            run += 1
            messages += 1
            photos += photo
            text = said.split(" [shared a photo:")[0].strip()
            if not photo:
                lengths.append(words(text))
            if r.id in evidence:
                evidence_total += 1
                if not photo:
                    evidence_lengths.append(words(text))
                if asked is not None:
                    replies += 1
                    replies_without_words += not (content(asked) & content(said))
            if not photo:
                last_text = text
        if run:
            bursts.append(run)
    return {"messages": messages, "photos": photos, "evidence messages": evidence_total,
            "median words": statistics.median(lengths), "median words of evidence": statistics.median(evidence_lengths),
            "bursts": len(bursts), "median burst": statistics.median(bursts),
            "mean burst": round(statistics.fmean(bursts), 2),
            "share of bursts of 2+": round(sum(b > 1 for b in bursts) / len(bursts), 3),
            "evidence replying to a question": round(replies / max(evidence_total, 1), 3),
            "of those, no word of the question": round(replies_without_words / max(replies, 1), 3)}


def kinds(locomo: str | Path, scratch: Path) -> dict[str, list]:
    """kind -> its conversations (garden's, each with its judged questions), LoCoMo's three
    forms built in `scratch` from the files under `locomo`."""
    from garden.evaluation.locomo import load_conversations

    raw, messaging = Path(scratch) / "raw", Path(scratch) / "messages"
    raw.mkdir(parents=True, exist_ok=True)
    messaging.mkdir(parents=True, exist_ok=True)
    return {"locomo": load_conversations(locomo),
            "locomo-raw": load_conversations(raw_chat_logs(Path(locomo), raw)),
            "locomo-messages": load_conversations(messaging_form(Path(locomo), messaging))}
