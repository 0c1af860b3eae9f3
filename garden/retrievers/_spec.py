"""Retriever specs: `name` or `name:key=value:key=value` (say `bm25:variant=plus:k1=1.2`),
so a variant can be named wherever a pipeline name goes. A value may hold colons (a URI:
`milvus-dense:uri=http://127.0.0.1:19530:timeout=5`): only a colon followed by `key=`
starts the next option."""
from __future__ import annotations

import math
import re

from garden.errors import GardenError

_NEXT_OPTION = re.compile(r":(?=[A-Za-z_][A-Za-z0-9_]*=)")


def parse_spec(spec: str) -> tuple[str, dict]:
    """The name and its options. Values read as int, float, true/false, or text; a number
    that is not finite ("nan", "inf", "1e999") stays the text it was, so it never becomes a
    float here (`make_retriever` refuses it)."""
    name, pairs = spec_text(spec)
    return name, {key: option_value(raw) for key, raw in pairs.items()}


def spec_text(spec: str) -> tuple[str, dict[str, str]]:
    """The name and each option's text as written, for a declared option to read by its
    own type and for a refusal to quote."""
    name, *pairs = _NEXT_OPTION.split(spec)
    name, colon, stray = name.partition(":")
    if colon:
        raise GardenError(f"retriever {spec!r}: options are key=value, got {stray.split(':')[0]!r}")
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise GardenError(f"retriever {spec!r}: options are key=value, got {pair!r}")
        if key in options:
            raise GardenError(f"retriever {spec!r}: option {key} is given twice")
        options[key] = raw
    return name, options


def option_value(raw: str):
    """An option's text read without a declaration: true/false, int, finite float, or the text."""
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for kind in (int, float):
        try:
            value = kind(raw)
        except ValueError:
            continue
        return value if math.isfinite(value) else raw
    return raw
