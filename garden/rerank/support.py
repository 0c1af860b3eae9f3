"""The query's support and the store's level: the formula the decide stage weighs
(garden/rerank/decide.py, whose docstring gives it and where its weights come from), a
store's reference it reads the support against (`Reference`: built by
garden/pipelines/store_reference.py, armed by the calibration stage), and the verdict it
hands on (`Verdict`: the lanes answer by it, the packet's gate and a store's reference are
made of it).

Here, below the query's context, so that the context can name these types for the fields
that carry them (`QueryContext.calibrated`, `QueryContext.verdict`): a stage's module
imports the context, which cannot import it back.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cached_property

import numpy as np

W_TOP, W_HELD, W_KNOWN, W_SECOND, W_BIAS = 0.49, 3.64, 2.25, 1.39, -1.98
WEIGHTS = np.array([W_TOP, W_HELD, W_KNOWN, W_SECOND])   # in the order `features` gives
KNOWN_WEIGHT, FOREIGN_WEIGHT = 2.0, 1.0
FOREIGN_LEVEL = 0.9                     # the foreign questions' 90th percentile
GLOBAL_LEVEL = 4.34                     # the level of a store without a reference: the development stores' median
PARTS = ("top", "held", "known", "second")
TOP_FLOOR = 1e-3   # ln(top) for a best score of 0 (nothing scored): silence, not a math error


def features(parts) -> np.ndarray:
    """Rows of (ln top, held, known, ln second) from rows of the support's parts (PARTS
    order): what the support weighs."""
    parts = np.asarray(parts, dtype=np.float64).reshape(-1, len(PARTS))
    return np.column_stack([np.log(np.maximum(parts[:, 0], TOP_FLOOR)), parts[:, 1], parts[:, 2],
                            np.log(np.maximum(parts[:, 3], TOP_FLOOR))])


def supports(parts) -> np.ndarray:
    """The support (the formula in decide.py's docstring) of each row of `parts`."""
    return features(parts) @ WEIGHTS + W_BIAS


def support(top: float, held: float, known: float, second: float) -> float:
    """The support of one query's parts."""
    return float(supports([top, held, known, second])[0])


@dataclass(frozen=True)
class Reference:
    """A store's reference (garden/pipelines/store_reference.py): the support's parts
    (columns in PARTS order) of each of its known-item queries and of each foreign question,
    as they rank in this store. Its supports and level are the store's, worked out once."""

    known: np.ndarray
    foreign: np.ndarray

    @cached_property
    def _supports(self) -> tuple[np.ndarray, np.ndarray]:
        return supports(self.known), supports(self.foreign)

    @cached_property
    def _level(self) -> float:
        known, foreign = self._supports
        return float(KNOWN_WEIGHT * np.mean(known) + FOREIGN_WEIGHT * np.quantile(foreign, FOREIGN_LEVEL))

    def level(self) -> float:
        """The store's level (the formula in decide.py's docstring)."""
        return self._level

    def standing(self, value: float) -> dict[str, float]:
        """Where a support of `value` falls in this store: the share of its known-item
        queries whose support is higher, and the share of its foreign questions' that is
        lower."""
        known, foreign = self._supports
        return {"known_above": round(float(np.mean(known > value)), 4),
                "foreign_below": round(float(np.mean(foreign < value)), 4)}


@dataclass(frozen=True)
class Verdict:
    """The decide stage's verdict on one query, as its trace shows it (rounded to six
    places): the support and its parts (PARTS), the store's level (`level`: its reference's,
    or GLOBAL_LEVEL), the support less the level (`calibrated`), the setting `answer_at` and
    the support that reaches it (`threshold`), the ratio that answers whatever the support
    (`decisive`), whether the query is answered, and where its support falls among the
    reference's (`Reference.standing`; None without a reference)."""

    top: float
    held: float
    known: float
    second: float
    support: float
    level: float
    calibrated: float
    answer_at: float
    threshold: float
    decisive: float
    answers: bool
    standing: dict[str, float] | None

    def parts(self) -> list[float]:
        """The support's parts, in PARTS order: a row of a store's reference."""
        return [float(getattr(self, part)) for part in PARTS]

    def traced(self) -> dict:
        """The trace's copy, for display: no stage reads it."""
        return asdict(self)
