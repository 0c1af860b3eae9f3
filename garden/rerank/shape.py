"""The shape stage: does the question gather, or point at one thing?

A pinpoint question is answered by one record ("What name did Odile give her boat?"). A
gathering question is answered by a set, its evidence told in several sittings: a list
("Which dishes has Odile cooked with fennel?"), a "both" or "all", a count, the time
between two events, an order, a comparison. Every stage ranks records one by one; the
gather stage (gather.py) reads this stage's verdict and treats a gathering question as
asking for a set.

The shape is read from the question's text alone, by the rules below, each a small pure
function over the question's lower-cased words that returns the words that fired it (a
cue) or nothing. No rule reads a story, a name list, a dataset's ids or its category
labels: the same rules hold for any store. The rules come from how questions that gather
are asked in English (a quantifier, a count, an interval, a comparison, a plural asked of
someone's history); they are written down here, tested on fictional questions
(tests/test_shape.py), and only checked, never fitted, against the benchmarks' own
categories (docs/gathering.md gives the agreement).

- `quantifier`: "both", "all" (not "at all"), "each", "every", "either", "any of"
  ("Which cafés have both of them visited?");
- `count`: "how many", "how often", "number of", "total", "in total", "altogether",
  "combined", "so far" ("How many times has Teodor sailed?");
- `interval`: "how long" or "how many days" (weeks, months, ...) with "between",
  "after", "before", "since", "until", "apart", "passed"; or "between ... and" ("How many
  days passed between the regatta and the storm?");
- `order`: "before or after", "which came first", "earlier or later", "the first time",
  "the last time" ("Did Odile buy the boat before or after the storm?");
- `comparison`: "more than", "less than", "fewer than", "compared", "in common", "the same
  as", "differ", "similar", a comparative "-er than", "more ... or ..." ("Is the new boat
  faster than the old one?");
- `pair`: two capitalised names joined by "and", not at the question's start ("What do
  Odile and Teodor like to cook?");
- `plural`: "what" or "which" followed within two words by a plural noun that a verb of
  someone's history follows ("What books has Ida read?"), "what kinds (types, sorts) of",
  or "what are/were" ("What are Ida's favourite films?").

A question no rule fires on is pinpoint. "How many" asked of a single quantity the story
states once ("How many people came to the wedding?") is read as gathering too: the rule
cannot tell a count to be made from a count that is told; docs/gathering.md reports what
that costs.
"""
from __future__ import annotations

import re

from garden.rerank.context import QueryContext, StageBase
from garden.rerank.query import GATHERING, PINPOINT, SHAPES, Shape  # noqa: F401


_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_QUANTIFIERS = {"both", "all", "each", "every", "either"}
_COUNTS = ("how many", "how often", "number of", "in total", "altogether", "combined", "so far",
           "total")
_UNITS = {"minutes", "hours", "days", "weeks", "months", "years", "nights", "weekends"}
# in the order a cue names them: "between" says more than "passed"
_INTERVAL_LINKS = ("between", "after", "before", "since", "until", "till", "apart", "passed", "elapsed")
_ORDER = ("before or after", "after or before", "which came first", "which happened first", "earlier or later",
          "the first time", "the last time", "which did", "who first")
_COMPARISON = ("more than", "less than", "fewer than", "compared", "in common", "the same as", "differ",
               "similar", "which is more", "who is more", "more often")
_COMPARATIVE = re.compile(r"\b\w+er\s+than\b|\b(?:more|less|fewer|better|worse)\b.*\bor\b")
# words that end in s without being plural nouns (verbs, pronouns, adverbs, singulars)
_NOT_PLURAL = {"is", "was", "has", "does", "his", "hers", "its", "this", "thus", "yes", "us", "as", "plus",
               "always", "perhaps", "news", "series", "species", "physics", "gas", "bus", "class", "less",
               "across", "unless", "towards", "afterwards", "besides", "various", "previous", "famous",
               "serious", "nervous", "christmas", "ours", "yours", "theirs", "whereas", "sometimes",
               "lots", "means", "status", "bonus", "campus", "virus", "focus", "process", "business",
               "success", "address", "dress", "kiss", "boss", "loss", "chess", "glass", "grass", "tennis"}
_KIND_OF = {"kinds", "types", "sorts"}
_ABOUT_HISTORY = {"has", "have", "had", "did", "do", "does", "are", "were", "used", "been"}
_WH = {"what", "which"}


def _words(text: str) -> list[str]:
    return [w.lower().replace("’", "'") for w in _WORD.findall(text)]


def _phrase(text: str, phrases) -> str | None:
    for p in phrases:
        if re.search(rf"\b{re.escape(p)}\b", text):
            return p
    return None


def quantifier(words: list[str], text: str, raw: str) -> str | None:
    """A quantifier over a set: both, all, each, every, either, "any of"."""
    for w in words:
        if w in _QUANTIFIERS:
            # "at all" asks no set ("Did she like it at all?")
            if w == "all" and re.search(r"\bat all\b", text):
                continue
            return w
    return _phrase(text, ("any of",))


def count(words: list[str], text: str, raw: str) -> str | None:
    """A count or a total: how many, how often, number of, in total, altogether; not "how
    many days" (a length of time, the interval rule's)."""
    if _asks_length(words):
        return _phrase(text, tuple(c for c in _COUNTS if c != "how many"))
    return _phrase(text, _COUNTS)


def _asks_length(words: list[str]) -> bool:
    return any(w == "how" and i + 2 < len(words) and words[i + 1] == "many" and words[i + 2] in _UNITS
               for i, w in enumerate(words))


def interval(words: list[str], text: str, raw: str) -> str | None:
    """The time between two events: "how long ... after/before/since/between", "how many
    days ... between", or "between X and Y"."""
    asks_length = "how long" in text or _asks_length(words)
    link = next((w for w in _INTERVAL_LINKS if w in words), None)
    if asks_length and link is not None:
        return f"how long ... {link}"
    if re.search(r"\bbetween\b.+\band\b", text):
        return "between ... and"
    return None


def order(words: list[str], text: str, raw: str) -> str | None:
    """Which of two events came first: "before or after", "which came first"."""
    return _phrase(text, _ORDER)


def comparison(words: list[str], text: str, raw: str) -> str | None:
    """A comparison of two things: "more than", "in common", a comparative "-er than"."""
    found = _phrase(text, _COMPARISON)
    if found:
        return found
    m = _COMPARATIVE.search(text)
    return m.group(0) if m else None


def pair(words: list[str], text: str, raw: str) -> str | None:
    """Two capitalised names joined by "and", neither the question's first word: two people
    (or places) asked of together."""
    m = re.search(r"(?<!^)(?<![.?!] )\b([A-Z][a-z'’]+)\s+and\s+([A-Z][a-z'’]+)\b", raw)
    if m and m.start() > 0:
        return f"{m.group(1)} and {m.group(2)}"
    return None


def plural(words: list[str], text: str, raw: str) -> str | None:
    """A plural asked of someone's history: "what"/"which" followed within two words by a
    plural noun ("What books has Ida read?", "Which dishes has Odile cooked?"), "what
    kinds of", or "what are/were ..."."""
    for i, w in enumerate(words):
        if w not in _WH:
            continue
        after = words[i + 1:i + 4]
        if after and after[0] in ("are", "were"):
            return f"{w} {after[0]}"
        for j, nxt in enumerate(after[:2]):
            if nxt in _KIND_OF:
                return f"{w} {nxt}"
            if _is_plural(nxt):
                # the plural must be the thing asked for: a verb of history follows it
                rest = words[i + j + 2:i + j + 4]
                if any(r in _ABOUT_HISTORY for r in rest) or len(words) <= i + j + 2:
                    return f"{w} {nxt}"
            if nxt in _ABOUT_HISTORY or nxt in ("is", "was"):
                break
    return None


def _is_plural(word: str) -> bool:
    return (len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is", "'s"))
            and word not in _NOT_PLURAL)


RULES = (quantifier, count, interval, order, comparison, pair, plural)


def shape_of(question: str) -> Shape:
    """The shape of `question` (see the module docstring): every rule that fires, in order."""
    raw = question.strip()
    text = " ".join(_words(raw))
    words = text.split()
    cues = tuple((rule.__name__, found) for rule in RULES if (found := rule(words, text, raw)))
    return Shape(GATHERING if cues else PINPOINT, cues)


_FACET_RULES = (
    # the two events of an interval: "between A and B"
    re.compile(r"\bbetween\s+(?P<a>.+?)\s+and\s+(?P<b>.+)$", re.IGNORECASE),
    # the two events of an order: "did A before or after B"
    re.compile(r"^(?:(?:did|was|were|is|has|had|does|do)\s+)?(?P<a>.+?)\s+(?:before or after|after or before)\s+"
               r"(?P<b>.+)$", re.IGNORECASE),
    # "how long after A did B"
    re.compile(r"\bhow long\s+(?:after|before|since)\s+(?P<a>.+?)\s+(?:did|was|were|had|has|does|do)\s+(?P<b>.+)$",
               re.IGNORECASE),
)
_PAIR = re.compile(r"\b(?:both\s+)?([A-Z][a-z'’]+)\s+and\s+([A-Z][a-z'’]+)\b(?:\s+both\b)?")


def facets(question: str) -> tuple[str, ...]:
    """The parts a gathering question asks of separately, each to be searched on its own:
    the two events of an interval or an order ("How many days passed between the regatta
    and the storm?": "the regatta", "the storm"), or the question asked of each person of a
    pair ("Which town have both Odile and Teodor visited?": "Which town have Odile
    visited", "Which town have Teodor visited"). None for any other question."""
    raw = question.strip().rstrip("?!. ").strip()
    for rule in _FACET_RULES:
        m = rule.search(raw)
        if m:
            return tuple(part.strip(" ,") for part in (m.group("a"), m.group("b")) if part.strip(" ,"))
    m = _PAIR.search(raw)
    if m and m.start() > 0:
        return tuple(raw[:m.start()] + name + raw[m.end():] for name in m.groups())
    return ()


class ShapeStage(StageBase, name="shape", mode="arms", writes=("shape",),
                 title="Shape: a question that gathers, or one that points",
                 drawn=("gathering (a list, a both, a count, an interval, an order, a comparison) or pinpoint, from "
                        "the text alone")):
    """Arms `ctx.shape` with the question's shape; the gather stage reads it."""

    def run(self, ctx: QueryContext) -> None:
        ctx.shape = shape_of(ctx.spec.query)
        ctx.trace["shape"] = {"shape": ctx.shape.kind, "cues": [list(c) for c in ctx.shape.cues]}
