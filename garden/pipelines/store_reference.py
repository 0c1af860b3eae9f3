"""A store's own reference for the decide stage: how questions it can and cannot answer rank in it.

The decide stage reads a query's support against the store's level (garden/rerank/decide.py,
`Reference`; the calibration stage arms it). The level comes from two sets of simulated
queries, built from the store alone and a fixed reference, each run through the pipeline up
to its decide stage with the answer forced, its support's parts kept:

- KNOWN_ITEMS known-item queries (Azzopardi, de Rijke and Balog, SIGIR 2007, "Building
  simulated queries for known-item topics"): a record picked uniformly among the retrievable
  ones holding at least MIN_WORDS content words, then WORDS of its words (3 to 5) without
  replacement, each with probability in proportion to its term's weight in the store
  (ln(1 + N / (df + 0.5)), the decide stage's weight: their discriminative term selection),
  kept in the record's order. A question the store can answer, asked in its own words.
- the foreign questions of FOREIGN_QUESTIONS (this folder): fictional everyday questions
  about people, their hobbies, homes, work, families and trips, asked in the first, second
  and third person, none about any store the garden ships; `{A}` and `{B}` are the store's
  first two people by name (its speakers in the order they first speak, as foreign
  negatives name them: garden/evaluation/negatives.py), STAND_INS where it has fewer.
  Questions it was never asked to hold.

Deterministic: the draws are seeded by SEED alone and read the records in the story's order,
so a store's queries depend on its text, not on its name or its records' ids. Run as of the
latest date the story mentions (everything it holds visible). A store with fewer than
MIN_RECORDS records to draw from has no reference (the decide stage's global level).

Made once per story's content and pipeline and saved beside the indexes
(garden/derived/tables.py: arrays, owner-only, a damaged or foreign save removed and made
again), under a name that hashes the pipeline's stages, its base retriever and the code of
every stage and retriever module it runs, so a changed store, pipeline or rule is another
reference. The cost is KNOWN_ITEMS + len(FOREIGN_QUESTIONS) queries, each run only up to the
decide stage: on two cores about 5 seconds for a LongMemEval haystack (500 turns) and 8 for
a LoCoMo conversation (600 records), measured by experiments/store_gate.py.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
from importlib import resources
from typing import Callable, Sequence

import numpy as np

from garden._state import State
from garden.derived.saves import story_key
from garden.derived.tables import Codec, code_key, remembered
from garden.models import Story
from garden.rerank.calibration import KNOWN_ITEM_POOL, MIN_WORDS, PEOPLE, content_terms  # noqa: F401
from garden.rerank.decide import PARTS, Reference, vocabulary
from garden.rerank.query import QuerySpec
from garden.rerank.stages import Settings
from garden.retrievers import ProcessCache

KNOWN_ITEMS = 100
WORDS = (3, 5)
MIN_RECORDS = 100
SEED = 0
STAND_INS = ("Ardith", "Bexley")
FOREIGN_QUESTIONS = "foreign_questions.txt"
FALLBACK_AS_OF = dt.date(2000, 1, 1)   # a story that mentions no date: no record is dated after it
FORCED = -1e9                          # an answer_at below every support: the gate always answers


_NONE = Reference(np.zeros((0, len(PARTS))), np.zeros((0, len(PARTS))))   # a store too small for one


def foreign_questions(story: Story) -> list[str]:
    """The fixed foreign questions, each person named as one of `story`'s people."""
    text = resources.files("garden.pipelines").joinpath(FOREIGN_QUESTIONS).read_text(encoding="utf-8")
    names = [names[0] for names in PEOPLE.of(story)[:2]]
    a, b = (names + list(STAND_INS[len(names):]))[:2]
    return [line.strip().replace("{A}", a).replace("{B}", b) for line in text.splitlines() if line.strip()]


def content_words(text: str, vocab) -> list[tuple[str, float]]:
    """Each word of `text` that is one content term, first use only (the calibration
    stage's `content_terms`), with its term's weight in the store."""
    return [(word, vocab.weight(term)) for word, term in content_terms(text)]


class _DrawnWords(Sequence):
    """The pool's (record id, weighted content words), the words made for a record when it
    is drawn: only the drawn records are read."""

    def __init__(self, ids: tuple[str, ...], words_of: Callable[[str], list[tuple[str, float]]]):
        self._ids, self._words_of = ids, words_of

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, n):
        return self._ids[n], self._words_of(self._ids[n])


def known_item_queries(story: Story, count: int = KNOWN_ITEMS, seed: int = SEED,
                       lengths: tuple[int, int] = WORDS) -> list[tuple[str, str]]:
    """(record id, query) pairs drawn from `story`'s own records (see the module
    docstring), each of `lengths` words (inclusive); none when fewer than MIN_RECORDS
    records hold MIN_WORDS content words. The pool of records is a whole-store table
    (`KNOWN_ITEM_POOL`); only the records drawn are read, by id (a story in Milvus reads
    them from there)."""
    pool = KNOWN_ITEM_POOL.of(story)
    if len(pool) < MIN_RECORDS:
        return []
    vocab = vocabulary(story)
    words = _DrawnWords(pool, lambda rid: content_words(story.by_id[rid].searchable, vocab))
    return draw_queries(words, count, random.Random(seed), lengths)


def draw_queries(pool: Sequence[tuple[str, list[tuple[str, float]]]], count: int, rng: random.Random,
                 lengths: tuple[int, int]) -> list[tuple[str, str]]:
    """`count` (record id, query) pairs from `pool` ((record id, its weighted content words)):
    a record picked uniformly, then `lengths` of its words drawn without replacement, each in
    proportion to its weight, kept in the record's order."""
    out = []
    for _ in range(count):
        rid, words = pool[rng.randrange(len(pool))]
        length = min(rng.randint(*lengths), len(words))
        chosen: set[int] = set()
        while len(chosen) < length:
            left = [i for i in range(len(words)) if i not in chosen]
            chosen.add(rng.choices(left, weights=[words[i][1] for i in left])[0])
        out.append((rid, " ".join(words[i][0] for i in sorted(chosen))))
    return out


def support_parts(pipeline, story: Story, text: str, as_of: dt.date) -> list[float] | None:
    """The support's parts (PARTS) of `text` in `story` under `pipeline`, its stages run up to
    the decide stage with the answer forced and no reference of its own; None when a stage
    before it stopped the query (triage asked back or skipped)."""
    ctx = pipeline.context(QuerySpec(story, text, as_of, settings=Settings(answer_at=FORCED)), reference=False)
    pipeline.run_stages(ctx, until="decide")
    return None if ctx.stopped or ctx.verdict is None else ctx.verdict.parts()


def build_reference(pipeline, story: Story) -> Reference:
    """The reference of `story` under `pipeline` (empty when the store is too small)."""
    known = known_item_queries(story)
    if not known:
        return _NONE
    as_of = story.latest or FALLBACK_AS_OF

    def parts(texts) -> np.ndarray:
        rows = [p for text in texts if (p := support_parts(pipeline, story, text, as_of)) is not None]
        return np.array(rows, dtype=np.float64).reshape(-1, len(PARTS))

    return Reference(parts(text for _, text in known), parts(foreign_questions(story)))


def _save(reference: Reference) -> State:
    state = State(meta={"known": len(reference.known), "foreign": len(reference.foreign)})
    if len(reference.known) and len(reference.foreign):   # a store too small has none: nothing to keep
        state.put("known", reference.known)
        state.put("foreign", reference.foreign)
    return state


def _load(state: State) -> Reference:
    counts = [int(state.number(name, 0)) for name in ("known", "foreign")]
    if not all(counts):
        return _NONE
    known, foreign = state.array("known", "f", 2, counts[0]), state.array("foreign", "f", 2, counts[1])
    if known.shape[1] != len(PARTS) or foreign.shape[1] != len(PARTS):
        raise ValueError(f"a reference's arrays must have {len(PARTS)} columns")
    return Reference(known, foreign)


REFERENCE = Codec(_save, _load)


PROCESS_REFERENCES: ProcessCache[Reference] = ProcessCache(limit=64)   # (content, pipeline) -> reference


def reference_of(pipeline, story: Story, members) -> Reference | None:
    """`story`'s reference under `pipeline` (whose base retriever has `members`), kept for
    the process, read from its save or built and saved; None for a store too small to have
    one."""
    modules = sorted({type(s).__module__ for s in pipeline.stages} | {type(m).__module__ for m in members}
                     | {__name__})
    what = json.dumps([pipeline.retriever_name, [s.name for s in pipeline.stages], code_key(*modules)])
    name = f"reference:{hashlib.sha256(what.encode()).hexdigest()[:16]}"
    found = PROCESS_REFERENCES.get((story_key(story), name), lambda: remembered(
        story, name, lambda s: build_reference(pipeline, s), REFERENCE))
    return found if len(found.known) and len(found.foreign) else None
