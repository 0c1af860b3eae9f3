"""Declared retriever options: each option's type and allowed range, in one place per class.

A retriever class lists its keyword options in an ``OPTIONS`` mapping of option name to
`Option`, built with `number`, `integer`, `boolean`, `choice` or `custom`. `make_retriever`
reads every option against that declaration before the class is called, so a value of
the wrong type, out of range, or not finite never reaches a constructor, and the refusal
names the retriever, the option, the allowed values and the value given:

    retriever bm25: option k1 must be positive, a finite number > 0 (got 'abc')
    retriever bm25: unknown variant 'x'; choose one of okapi, l, plus

Values come two ways: as the text after ``=`` in a spec (``bm25:k1=1.2``), read by the
option's own type, or as Python values given as keywords (``make_retriever("bm25",
k1=1.2)``), whose type must already be right. Neither way lets NaN or an infinity
through: IEEE 754 NaN compares false with everything, so a NaN parameter silently
misorders every ranking it touches, and JSON (RFC 8259, section 6) has no way to write it.
"""
from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from garden.errors import GardenError

_INTEGER = re.compile(r"[+-]?\d+", re.ASCII)


@dataclass(frozen=True)
class Option:
    """One declared option. `read` gives the value the constructor receives, or raises
    ValueError; `allowed` completes the sentence "option X must be ..."."""

    allowed: str
    read_text: Callable[[str], Any]
    read_value: Callable[[Any], Any]
    choices: tuple[str, ...] = ()  # a choice is refused as "unknown NAME 'x'; choose one of ..."

    def read(self, value: Any, text: bool) -> Any:
        return self.read_text(value) if text else self.read_value(value)


def _bound(value: float) -> str:
    return f"{value:g}"


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("not finite")
    return value


def _in_range(value, low, high, above: bool):
    if low is not None and (value <= low if above else value < low):
        raise ValueError("below range")
    if high is not None and value > high:
        raise ValueError("above range")
    return value


def _range_words(kind: str, low, high, above: bool) -> str:
    if low is not None and high is not None:
        return f"{kind} from {_bound(low)} to {_bound(high)}"
    if low is not None and above:
        return f"{'positive, ' if low == 0 else ''}{kind} > {_bound(low)}"
    if low is not None:
        return f"{kind} >= {_bound(low)}"
    if high is not None:
        return f"{kind} <= {_bound(high)}"
    return kind


def number(low: float | None = None, high: float | None = None, *, above: bool = False) -> Option:
    """A finite real number, at least `low` (more than `low` when `above`), at most `high`."""

    def check(value: float) -> float:
        return _in_range(_finite(value), low, high, above)

    def from_value(value):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError("not a number")
        return check(float(value))

    # float() also reads "nan", "inf" and "1e999" (which overflows to inf): _finite refuses them
    return Option(_range_words("a finite number", low, high, above), lambda text: check(float(text)), from_value)


def integer(low: int | None = None, high: int | None = None) -> Option:
    """A whole number (1.5 and 2.0 are refused alike), at least `low`, at most `high`."""

    def from_text(text: str) -> int:
        if not _INTEGER.fullmatch(text):
            raise ValueError("not a whole number")
        return _in_range(int(text), low, high, False)

    def from_value(value):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError("not a whole number")
        return _in_range(int(value), low, high, False)

    return Option(_range_words("a whole number", low, high, False), from_text, from_value)


def boolean() -> Option:
    """true or false: in a spec the words themselves, from Python a real bool (never 0 or 1)."""

    def from_text(text: str) -> bool:
        if text.lower() not in ("true", "false"):
            raise ValueError("not a boolean")
        return text.lower() == "true"

    def from_value(value):
        if not isinstance(value, bool):
            raise ValueError("not a boolean")
        return value

    return Option("true or false", from_text, from_value)


def choice(*names: str) -> Option:
    """One of `names`, spelled exactly."""

    def read(value):
        if not isinstance(value, str) or value not in names:
            raise ValueError("not a choice")
        return value

    return Option(f"one of {', '.join(names)}", read, read, tuple(names))


def custom(allowed: str, read_text: Callable[[str], Any], read_value: Callable[[Any], Any]) -> Option:
    """Any other shape: two readers that return the value or raise ValueError."""
    return Option(allowed, read_text, read_value)


def read_options(retriever: str, declared: Mapping[str, Option], text: Mapping[str, str],
                 given: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments for a declared retriever: `text` (from a spec) read by each
    option's type, then `given` (Python keywords), which win over the spec as they always
    have. Every problem is one line; all of them are raised together."""
    problems: list[str] = []
    unknown = [key for key in {**text, **given} if key not in declared]
    if unknown:
        problems.append(f"retriever {retriever} does not take those options: {', '.join(map(repr, unknown))} "
                        f"(known: {', '.join(declared) or 'none'})")
    out: dict[str, Any] = {}
    for source, is_text in ((text, True), (given, False)):
        for key, value in source.items():
            option = declared.get(key)
            if option is None:
                continue
            try:
                out[key] = option.read(value, is_text)
            except (ValueError, TypeError, OverflowError):
                if option.choices:
                    problems.append(f"retriever {retriever}: unknown {key} {value!r}; "
                                    f"choose one of {', '.join(option.choices)}")
                else:
                    problems.append(f"retriever {retriever}: option {key} must be {option.allowed} (got {value!r})")
    if problems:
        raise GardenError(problems)
    return out


def non_finite(value: Any) -> bool:
    """A float NaN or infinity, or spec text that float() would read as one."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return False
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and not math.isfinite(value)
