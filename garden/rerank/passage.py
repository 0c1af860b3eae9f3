"""The passage stage: a long record rides as the passage of it that answers the query.

A packet's budget is counted in characters, and a chat memory's assistant turns run to
thousands of them: at 1,200 characters a packet holds one or two, and most of what it pays
for is text the question does not ask about. With this stage armed, the pack stage packs a
raw record (a source or a chunk) longer than `passage_chars` as one window of at most
`passage_chars` characters of its text: the run of whole sentences that holds the most of
the query's terms, each term counted once and weighted by the store's own idf,
w(t) = ln(1 + N / (df(t) + 0.5)), as the decide stage's vocabulary weighs them. That is
passage-level evidence in fixed windows (Callan 1994, "Passage-level evidence in document
retrieval", SIGIR) read as a query-biased summary, sentences chosen by the query's terms
(Tombros & Sanderson 1998, "Advantages of query biased summaries in information retrieval",
SIGIR).

The rule, in full:

- units: the record's text split after a sentence's end (`.`, `!`, `?`, closing quotes and
  brackets with them; not a list's "2.") and at each line break; a unit longer than the
  window is cut at the last space that fits (a word longer than the window, at the window);
- each window starting at a unit takes the following units while they fit; it scores the
  summed weights of the distinct query terms it holds (`garden.analyzer.analyze`, as every
  lexical retriever analyzes text);
- the best score wins, ties to the latest start, so the passage opens on the sentence where
  the query's words begin and reads on; a window that stops at the record's end takes
  earlier units back while they fit;
- a record holding none of the query's terms (one only the embedding found) rides as its
  opening window, the lead that summarizes a text best when nothing else says where to look
  (the lead baseline of summarization; Nenkova 2005, "Automatic text summarization of
  newswire: lessons learned from the Document Understanding Conference", AAAI).

A record no longer than the window rides whole. The item keeps the record's id, so it
points at the whole record, and carries where the passage sits (`passage`: its start and
end in the record's text and the text's full length; its text is exactly that span); it is
labelled `passage`, its `why` saying which characters of how many. Curated records (states,
decisions) and derived ones (notes, views) ride whole: each is one statement written to be
read whole, and a view's coverage of what it cites would not hold for a part of it. A
record reached by a certain route (an id the query names, a source a packed item cites)
rides whole, as the restated stage leaves it: it was asked for, not found. The packet
measures count a passage as its record (garden/evaluation/packets.py).

`passage_chars` and `passage_at` (300 and 300) were chosen by cross-validation over both
development benchmarks, every fold choosing the same (experiments/passages.py;
docs/longmemeval.md gives every fold and every setting tried).
"""
from __future__ import annotations

import math
import re

from garden.analyzer import analyze
from garden.rerank.candidates import Candidate
from garden.rerank.context import PackRule, QueryContext, Setting, StageBase
from garden.rerank.decide import vocabulary
from garden.rerank.neighbours import RAW_KINDS

PASSAGE_CHARS = Setting("passage_chars", int, 300, "a passage's window: at most this many characters "
                        "(experiments/passages.py)", ge=40)
PASSAGE_AT = Setting("passage_at", int, 300, "a raw record longer than this and than the window rides as its "
                     "passage (experiments/passages.py)", ge=40)

LABEL = "passage"
KINDS = RAW_KINDS   # raw material; curated and derived records ride whole
# a sentence ends at its mark, with the quotes and brackets that close it, before a space,
# unless the mark follows a number of one or two digits alone (a list's "2." opens its
# item); a line break ends a unit too (a list item, a heading)
_END = re.compile(r"(?<!\b\d)(?<!\b\d\d)[.!?]+[\"'\u2019\u201d)\]]*(?=\s)|\n")
_SPACE = re.compile(r"\s")


def units(text: str, limit: int) -> list[tuple[int, int]]:
    """The text's units as (start, end) character offsets, whitespace trimmed, none longer
    than `limit`: sentences and lines, a longer one cut at its last space that fits."""
    out: list[tuple[int, int]] = []
    cursor = 0
    for m in _END.finditer(text):
        _add(text, cursor, m.start() if m.group() == "\n" else m.end(), limit, out)
        cursor = m.end()
    _add(text, cursor, len(text), limit, out)
    return out


def _add(text: str, start: int, end: int, limit: int, out: list[tuple[int, int]]) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    while end - start > limit:
        cut = max((m.start() for m in _SPACE.finditer(text, start + 1, start + limit + 1)), default=start + limit)
        _add(text, start, cut, limit, out)
        start = cut
        while start < end and text[start].isspace():
            start += 1
    if end > start:
        out.append((start, end))


def best_passage(text: str, weights: dict[str, float], limit: int) -> tuple[int, int, float]:
    """(start, end, score) of the passage of `text` to pack for a query whose terms weigh
    `weights` (term -> weight), at most `limit` characters (the rule in the module
    docstring); the whole text when it fits. No checks: `passage` is the public one."""
    spans = units(text, limit) if len(text) > limit else []
    if not spans:   # it fits (or holds no unit at all): whole
        found = set(analyze(text))
        return 0, len(text), math.fsum(w for t, w in weights.items() if t in found)
    held = [frozenset(t for t in analyze(text[a:b]) if t in weights) for a, b in spans]
    best, best_score = (0, 0), -1.0
    for i in range(len(spans)):
        j, got = i, set()
        while j < len(spans) and spans[j][1] - spans[i][0] <= limit:
            got |= held[j]
            j += 1
        # fsum: exact, so one set of terms scores the same in any order (a set's order
        # follows the process's string hashing, and a plain sum's last bit with it)
        score = math.fsum(weights[t] for t in got)
        if score > 0 and score >= best_score:
            best, best_score = (i, j), score
    if best_score < 0:   # no unit holds a query term: the opening window
        j = 0
        while j < len(spans) and spans[j][1] - spans[0][0] <= limit:
            j += 1
        best, best_score = (0, j), 0.0
    i, j = best
    while i > 0 and spans[j - 1][1] - spans[i - 1][0] <= limit:
        i -= 1
    return spans[i][0], spans[j - 1][1], best_score


def passage(text: str, weights: dict[str, float], limit: int) -> tuple[int, int, float]:
    """`best_passage`, its input checked: ValueError for a window under one character or a
    weight that is not a finite number at least 0."""
    if not isinstance(limit, int) or limit < 1:
        raise ValueError(f"a passage's window is a whole number of characters, at least 1 (got {limit!r})")
    for term, w in weights.items():
        if not (isinstance(w, (int, float)) and 0 <= w < float("inf")):
            raise ValueError(f"the weight of term {term!r} must be a finite number at least 0 (got {w!r})")
    return best_passage(text, weights, limit)


def query_weights(ctx: QueryContext) -> dict[str, float]:
    """The query's distinct terms, each weighted by the store's idf. A time the query names
    (window.py) says when, not what: its words are left out, as the decide stage leaves them."""
    query = ctx.spec.query.replace(ctx.window.said, " ") if ctx.window is not None else ctx.spec.query
    vocab = vocabulary(ctx.spec.story)
    return {t: vocab.weight(t) for t in dict.fromkeys(analyze(query))}


def passage_of(ctx: QueryContext, c: Candidate, terms: dict[str, float]) -> tuple[int, int] | None:
    """Where in `c`'s text the passage to pack for the query's weighted `terms` sits, or None:
    `c` rides whole (a record that fits the window, one not raw, one reached by a certain
    route)."""
    limit = ctx.settings.passage_chars
    body = c.record.body
    if c.certain or c.record.kind not in KINDS or len(body) <= max(limit, ctx.settings.passage_at):
        return None
    start, end, _ = best_passage(body, terms, limit)
    return start, end


def rides_as_passage(c: Candidate, span: tuple[int, int], terms: dict[str, float]) -> None:
    """Record that `c` rides as the passage `span` of its text, and label it."""
    start, end = span
    length = len(c.record.body)
    found = set(analyze(c.record.body[start:end])) & set(terms)
    holds = (f"holding {len(found)} of the query's {len(terms)} terms" if found
             else "its opening: it holds none of the query's terms")
    c.passage = span
    c.label(LABEL, f"a passage, characters {start:,} to {end:,} of {length:,}, {holds}; the whole record is {c.id}")


class AsPassage(PackRule):
    """The passage stage's packing rule for one query: a long raw record rides as its
    passage holding the query's weighted `terms` (`passage_of`, `rides_as_passage`)."""

    def __init__(self, terms: dict[str, float]):
        self.terms = terms

    def cut(self, ctx: QueryContext, c: Candidate) -> tuple[int, int] | None:
        return passage_of(ctx, c, self.terms)

    def rides(self, c: Candidate, span: tuple[int, int]) -> None:
        rides_as_passage(c, span, self.terms)

    def noted(self, c: Candidate, item: Candidate, span: tuple[int, int] | None) -> str:
        return " (as its passage)" if span is not None else ""


class Passage(StageBase, name="passage", settings=(PASSAGE_CHARS, PASSAGE_AT), mode="selects", reads=("window",),
              writes=("pack_rules",), labels=(LABEL,), title="Passage: a long record rides as its answer",
              drawn=("a long raw record rides as the passage of it that holds the query's words, under the record's "
                     "own id")):
    """Arms its packing rule with the query's terms: which records ride is known only while
    packing, so the pack stage asks the rule then."""

    def run(self, ctx: QueryContext) -> None:
        ctx.pack_rules.append(AsPassage(query_weights(ctx)))
