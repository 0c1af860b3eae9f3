"""Rendering untrusted values into one-line, bounded messages.

Every value a message shows comes from a file someone else may have written. Printed as
is, a newline splits one problem over two lines, a right-to-left override reorders what
the reader sees, and a value of a million items prints a million items. These helpers
escape what could change how a line reads and cut what is too long, saying how long the
original was, so a message stays one honest line whatever the input.
"""
from __future__ import annotations

import math
import re
import unicodedata

ELLIPSIS = "\u2026"
MIN_LIMIT = 20          # below this a cut value would show nothing useful
SHOWN_LIMIT = 80        # a value inside a message
ID_LIMIT = 64           # an id printed as the "where" of a message
LINE_LIMIT = 500        # a whole printed message line
_MAX_NESTING = 100      # deeper containers are cut; also keeps rendering off the recursion limit

# Characters that change how a line reads rather than what it says: controls (newline,
# NUL, escape sequences), format characters (bidi overrides, zero-width joiners) and the
# Unicode line and paragraph separators.
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp"})

# An id printed bare: plain ASCII that cannot be mistaken for the separators or quotes of
# the message around it. Anything else is quoted and escaped like a value.
_BARE_ID = re.compile(r"[!#-&(-9;-\[\]-~]+(?: [!#-&(-9;-\[\]-~]+)*")


def _limit(limit: int) -> int:
    return max(int(limit), MIN_LIMIT)


def _escape_char(ch: str, quote: str | None) -> str:
    """One character as repr() would write it inside `quote`; `quote` None escapes only
    what is hidden (for a message line that is already made of quoted values)."""
    if quote is None:
        if unicodedata.category(ch) not in _HIDDEN:
            return ch
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch) or repr(ch)[1:-1]
    if ch == quote or ch == "\\":
        return "\\" + ch
    if ch.isprintable():  # false for every category in _HIDDEN, as in repr()
        return ch
    return repr(ch)[1:-1]


def _quote_for(text: str) -> str:
    # repr()'s own choice, so a short value reads exactly as repr() would print it
    return '"' if "'" in text and '"' not in text else "'"


def _str_pieces(text: str):
    quote = _quote_for(text)
    yield quote
    for ch in text:
        yield _escape_char(ch, quote)
    yield quote


def _scalar_repr(value) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return repr(value)
        except ValueError:  # past the interpreter's limit on converting integers to text
            digits = int(value.bit_length() * math.log10(2)) + 1
            return f"<integer of about {digits} digits>"
    try:
        text = repr(value)
    except Exception:  # a value's own repr() failing must not hide the problem being reported
        text = f"<{type(value).__name__}>"
    return "".join(_escape_char(ch, None) for ch in text)


def _pieces(value, depth: int, open_ids: set[int]):
    """The rendering of `value` in small pieces, so the caller can stop at its bound
    without ever building the whole text of a huge or deeply shared value."""
    if isinstance(value, str):
        yield from _str_pieces(value)
        return
    if not isinstance(value, (list, tuple, dict, set, frozenset)):
        yield from _scalar_repr(value)
        return
    if id(value) in open_ids:  # a value that contains itself
        yield "[...]" if isinstance(value, list) else "{...}" if isinstance(value, dict) else "(...)"
        return
    if depth >= _MAX_NESTING:
        yield ELLIPSIS
        return
    if isinstance(value, (set, frozenset)) and not value:
        yield f"{type(value).__name__}()"
        return
    open_ids.add(id(value))
    try:
        if isinstance(value, dict):
            yield "{"
            for i, (key, item) in enumerate(value.items()):
                if i:
                    yield ", "
                yield from _pieces(key, depth + 1, open_ids)
                yield ": "
                yield from _pieces(item, depth + 1, open_ids)
            yield "}"
            return
        opening, closing = {list: "[]", tuple: "()"}.get(type(value), "{}")
        yield opening
        for i, item in enumerate(value):
            if i:
                yield ", "
            yield from _pieces(item, depth + 1, open_ids)
        if isinstance(value, tuple) and len(value) == 1:
            yield ","
        yield closing
    finally:
        open_ids.discard(id(value))


def _size_note(value, rendered_chars: int | None) -> str:
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        return f" ({len(value)} item{'' if len(value) == 1 else 's'})"
    return f" ({len(value) if isinstance(value, str) else rendered_chars} chars)"


def _take(pieces, room: int) -> tuple[str, bool]:
    """Join pieces while they fit in `room` characters; (text, whether all fitted)."""
    out: list[str] = []
    used = 0
    for piece in pieces:
        if used + len(piece) > room:
            return "".join(out), False
        out.append(piece)
        used += len(piece)
    return "".join(out), True


def shown(value, limit: int = SHOWN_LIMIT) -> str:
    """`value` as repr() would write it, on one line, in at most `limit` characters.

    Control, format (bidi overrides included), line- and paragraph-separator characters
    are escaped as repr() escapes them (U+202E reads `\\u202e`). A rendering that does not
    fit is cut, ends with an ellipsis and notes the original size: `'aaaa…' (10000 chars)`
    for text, `[1, 2, …] (1000000 items)` for a container. `limit` below 20 counts as 20.
    """
    limit = _limit(limit)
    text, whole = _take(_pieces(value, 0, set()), limit)
    if whole:
        return text
    if isinstance(value, (str, list, tuple, dict, set, frozenset)):
        note = _size_note(value, None)
    else:  # a scalar with a long repr (a big integer): its length is cheap to know
        note = _size_note(value, len(_scalar_repr(value)))
    # a cut string keeps its closing quote, so it still reads as one quoted value
    closing = 1 if isinstance(value, str) else 0
    head, _ = _take(_pieces(value, 0, set()), limit - len(note) - 1 - closing)
    return head + ELLIPSIS + (head[:1] if closing else "") + note


def shown_id(rid, limit: int = ID_LIMIT) -> str:
    """An id as the "where" of a message: bare when it is plain ASCII (`chat.0102`,
    `Bad Id`) and at most `limit` characters, so ordinary messages read as they always
    have; otherwise quoted, escaped and cut by `shown`, so an id holding a newline or a
    bidi override can neither split the line nor disguise it."""
    if isinstance(rid, str) and len(rid) <= _limit(limit) and _BARE_ID.fullmatch(rid):
        return rid
    return shown(rid, limit)


def one_line(text: str, limit: int = LINE_LIMIT) -> str:
    """A whole message line made safe to print: hidden characters escaped (a newline reads
    `\\n`, U+202E reads `\\u202e`) and the line cut to `limit` characters, ending with an
    ellipsis and the original length. Text that is already one plain line comes back
    unchanged, so this can guard every printed line at no cost to ordinary messages."""
    text = str(text)
    limit = _limit(limit)
    if len(text) <= limit and text.isprintable():  # no hidden character (each one is not printable): as it is
        return text
    pieces = (_escape_char(ch, None) for ch in text)
    line, whole = _take(pieces, limit)
    if whole:
        return line
    note = f" ({len(text)} chars)"
    head, _ = _take((_escape_char(ch, None) for ch in text), limit - len(note) - 1)
    return head + ELLIPSIS + note


def is_number(text: str) -> bool:
    """Whether `text` is a whole number in ASCII digits. `str.isdigit` also takes '²' and
    other digits `int` cannot read, which would turn a typed argument into a traceback."""
    return text.isascii() and text.isdigit()


def plural(count: int, word: str, many: str | None = None) -> str:
    """`1 verdict`, `2 verdicts`, `1 known miss`, `2 known misses`: a count and its noun
    in the right number (`many` when the plural is not the noun and an s)."""
    return f"{count} {word if count == 1 else many or word + 's'}"
