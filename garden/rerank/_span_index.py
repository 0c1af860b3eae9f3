"""The phrase stage's index: every span of 2..MAX_SPAN adjacent words, and the records
holding it, in two sorted arrays instead of a dictionary of tuples.

A dictionary keyed by word tuples costs a Python object per span: at 100,000 records that
is some fifteen million objects, a quarter of a minute to build and nine seconds to load
from a save. Here each word gets an integer id, each span a 64-bit polynomial hash of its
ids and its length (computed for all spans of one length at once with numpy), and the
(hash, record) pairs are sorted once; a span's holders are one binary search away. Two
different spans sharing a hash is possible in principle (a 1 in 2^64 event per pair), so
the holders of a span that earns credit are confirmed on the records' own words
(`confirmed`); a span's count, used only to refuse a span above the ceiling, is not.
"""
from __future__ import annotations

import itertools
from typing import Iterable, Iterator

import numpy as np

from garden._state import State
from garden.analyzer import word_runs

MAX_SPAN = 8
CHUNK = 50_000  # records whose words are read at once by a streamed build
_MULT = np.uint64(0x9E3779B97F4A7C15)    # odd, 64-bit: the polynomial's base
_LENGTH = np.uint64(0xC2B2AE3D27D4EB4F)  # mixed in per span length


def _span_hash(ids: list[int]) -> int:
    """The hash of one span, as `SpanIndex.__init__` computes it for all spans at once."""
    mask = (1 << 64) - 1
    h = ids[0] + 1
    for word in ids[1:]:
        h = (h * int(_MULT) + word + 1) & mask
    return h ^ ((len(ids) * int(_LENGTH)) & mask)


def _spans(words: np.ndarray, run: np.ndarray, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(hash, owner) of every span of 2..MAX_SPAN adjacent words of one run."""
    tokens = words.astype(np.uint64) + np.uint64(1)
    hashes, holders = [], []
    h = tokens
    with np.errstate(over="ignore"):  # arithmetic mod 2^64 is the point
        for length in range(2, MAX_SPAN + 1):
            if len(tokens) < length:
                break
            h = h[:-1] * _MULT + tokens[length - 1:]
            same_run = run[: len(h)] == run[length - 1:]
            hashes.append(h[same_run] ^ (np.uint64(length) * _LENGTH))
            holders.append(owner[: len(h)][same_run])
    return (np.concatenate(hashes) if hashes else np.zeros(0, np.uint64),
            np.concatenate(holders) if holders else np.zeros(0, np.int32))


class SpanIndex:
    """span -> records holding it, for spans of 2..MAX_SPAN words of one run."""

    def __init__(self, texts: dict[str, str]):
        self._build(iter(texts.items()), len(texts) or 1)

    @classmethod
    def streamed(cls, texts: Iterable[tuple[str, str]], chunk: int = CHUNK) -> SpanIndex:
        """The index of (id, text) pairs read `chunk` at a time: the same arrays as one
        pass over all of them (the vocabulary grows in the same order, a span never
        crosses a record), without holding the texts."""
        index = cls.__new__(cls)
        index._build(iter(texts), chunk)
        return index

    def _build(self, texts: Iterator[tuple[str, str]], chunk: int) -> None:
        self.ids, self.vocab = [], {}
        words_parts, run_parts, hash_parts, owner_parts = [], [], [], []
        starts, run_count = [0], 0
        while True:
            part = list(itertools.islice(texts, chunk))
            if not part:
                break
            first = len(self.ids)
            self.ids += [rid for rid, _ in part]
            words, run_count = self._words(part, first, starts, run_count, words_parts, run_parts)
            hashes, owners = _spans(*words)
            hash_parts.append(hashes)
            owner_parts.append(owners)
        # each record's words and runs, kept to confirm a credited span's holders
        self.words = np.concatenate(words_parts) if words_parts else np.zeros(0, np.int64)
        self.run = np.concatenate(run_parts) if run_parts else np.zeros(0, np.int64)
        self.starts = np.asarray(starts, dtype=np.int64)
        hash_all = np.concatenate(hash_parts) if hash_parts else np.zeros(0, np.uint64)
        owner_all = np.concatenate(owner_parts) if owner_parts else np.zeros(0, np.int32)
        order = np.lexsort((owner_all, hash_all))
        hash_all, owner_all = hash_all[order], owner_all[order]
        # a record holding a span twice holds it once
        keep = np.ones(len(hash_all), dtype=bool)
        keep[1:] = (hash_all[1:] != hash_all[:-1]) | (owner_all[1:] != owner_all[:-1])
        self.hashes, self.owners = hash_all[keep], owner_all[keep]

    def _words(self, part, first: int, starts: list[int], run_count: int, words_parts, run_parts):
        """The word ids, owners and runs of one chunk of records (numbered from `first`)."""
        vocab, offset = self.vocab, starts[-1]
        words: list[int] = []
        owners: list[int] = []
        run_of: list[int] = []
        for n, (_, text) in enumerate(part, start=first):
            for run in word_runs(text):
                words.extend(vocab.setdefault(w, len(vocab)) for w in run)
                owners.extend([n] * len(run))
                run_of.extend([run_count] * len(run))
                run_count += 1
            starts.append(offset + len(words))
        word_ids, runs = np.asarray(words, dtype=np.int64), np.asarray(run_of, dtype=np.int64)
        words_parts.append(word_ids)
        run_parts.append(runs)
        return (word_ids, runs, np.asarray(owners, dtype=np.int32)), run_count

    def state(self) -> State:
        """Its arrays, the record ids and the vocabulary in id order, for a save."""
        state = State()
        state.put_strings("ids", self.ids)
        state.put_strings("vocab", list(self.vocab))
        for name in ("words", "run", "starts", "hashes", "owners"):
            state.put(name, getattr(self, name))
        return state

    @classmethod
    def from_state(cls, state: State, ids: list[str]) -> SpanIndex:
        """The index `state()` saved for the records `ids` (their ids, or a saved story's
        documents, whose ids are compared as saved); ValueError if it is not one."""
        index = cls.__new__(cls)
        if hasattr(ids, "encoded_ids"):
            index.ids = state.ids_of(ids)
        else:
            index.ids = state.strings("ids")
            if index.ids != ids:
                raise ValueError("saved for other records")
        vocab = state.strings("vocab")
        index.vocab = {w: i for i, w in enumerate(vocab)}
        index.words = state.positions("words", len(vocab))
        index.run = state.array("run", "i", 1, len(index.words))
        index.starts = state.positions("starts", len(index.words) + 1, len(ids) + 1)
        index.hashes = state.array("hashes", "u")
        index.owners = state.positions("owners", len(ids), len(index.hashes))
        if (len(index.vocab) != len(vocab) or index.starts[0] != 0 or index.starts[-1] != len(index.words)
                or not state.ordered("starts") or index.hashes.dtype != np.uint64 or not state.ordered("hashes")):
            raise ValueError("arrays of the span index do not agree")
        return index

    def _range(self, span: tuple[str, ...]) -> tuple[int, int]:
        ids = [self.vocab.get(w) for w in span]
        if len(span) < 2 or len(span) > MAX_SPAN or None in ids:
            return 0, 0
        h = np.uint64(_span_hash(ids))
        return int(np.searchsorted(self.hashes, h, "left")), int(np.searchsorted(self.hashes, h, "right"))

    def count(self, span: tuple[str, ...]) -> int:
        """Records holding `span` (by hash: see the module's docstring)."""
        lo, hi = self._range(span)
        return hi - lo

    def confirmed(self, span: tuple[str, ...]) -> set[str]:
        """The records holding `span`, each confirmed on its own words."""
        lo, hi = self._range(span)
        if lo == hi:
            return set()
        wanted = np.asarray([self.vocab[w] for w in span], dtype=np.int64)
        n, out = len(span), set()
        for owner in self.owners[lo:hi].tolist():
            words = self.words[self.starts[owner]:self.starts[owner + 1]]
            runs = self.run[self.starts[owner]:self.starts[owner + 1]]
            for i in np.flatnonzero(words[: len(words) - n + 1] == wanted[0]).tolist():
                if np.array_equal(words[i:i + n], wanted) and runs[i] == runs[i + n - 1]:
                    out.add(self.ids[owner])
                    break
        return out

