"""LoCoMo's conversations in three forms, the development kinds beside LongMemEval.

- `locomo`: as released (Maharana et al., ACL 2024, CC BY-NC 4.0), with the observations
  and session summaries the benchmark generated from each conversation;
- `locomo-raw`: the raw chat logs: turns and photo captions only (`raw_chat_logs`);
- `locomo-messages`: the messaging form (`messaging_form`): each turn of the raw logs sent
  as the messages a person would type.

The raw logs and the messaging form are built by the library's rules (garden/formats/chats.py,
where `garden compare --form` and `garden import chat-messages` build them too), so the
experiments' figures are the ones a user gets.

`shape` gives the statistics a real chat is compared on (the median words of a message
and of an evidence message, bursts, replies to a question).
"""
from __future__ import annotations

import statistics
from pathlib import Path

from garden.formats.chats import content, messaging_form, raw_chat_logs, words

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
