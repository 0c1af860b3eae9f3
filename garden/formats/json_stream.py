"""One element at a time from a JSON list too large to load: the released LongMemEval files
reach 2.7 GB, and `json.load` would hold all of it (and several times that in objects).

`iter_json_list` decodes each element with `json.JSONDecoder.raw_decode` from a buffer
that holds the element and at most one read ahead; consumed text is dropped, so memory
stays bounded by one element. Before an element is decoded, its text is scanned to its
end (strings skipped whole, brackets and commas counted) without building anything: an
element past `max_values` values is refused there, since a few bytes of JSON per value
(`{},` is three) can ask for a Python object each, and a small file for gigabytes of them.
Errors are GardenErrors located `file:line:column`, as the `json` module itself would
place them.
"""
from __future__ import annotations

import gzip
import io
import json
import re
import zlib
from pathlib import Path
from typing import Any, Iterator

from garden._files import open_regular
from garden.errors import GardenError
from garden.text import shown

CHUNK_CHARS = 1024 * 1024             # characters read at a time
MAX_ITEM_CHARS = 64 * 1024 * 1024     # one element; LongMemEval M's average record is about 5.4 million
MAX_VALUES = 1_000_000                # containers and members of one element
_WS = re.compile(r"[ \t\n\r]*")
# one token of JSON text: a whole string, a bracket or comma, or a run of anything else
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]|[^"\[\]{},]+')


class _Reader:
    """An incremental reader of a JSON list over a text stream.

    Each element is decoded by `json.JSONDecoder.raw_decode` from a buffer that holds
    the element and at most one read ahead. Consumed text is dropped, so memory stays
    bounded by one element, not by the file."""

    def __init__(self, fh, where: str, chunk_chars: int, max_item_chars: int, max_values: int = MAX_VALUES,
                 values_hint: str = ""):
        self.fh, self.where = fh, where
        self.chunk = max(1, int(chunk_chars))
        self.max_item = max_item_chars
        self.max_values, self.values_hint = max_values, values_hint
        self.text = ""
        self.eof = False
        self.line, self.col = 1, 1   # where text[0] is in the file
        self.offset = 0              # characters before text[0]
        self.dups: list[str] = []
        self.decoder = json.JSONDecoder(object_pairs_hook=self._pairs)

    def _pairs(self, pairs: list[tuple[str, Any]]) -> dict:
        out = dict(pairs)
        if len(out) != len(pairs) and len(self.dups) < 10:
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    self.dups.append(key)
                seen.add(key)
        return out

    def more(self, at_least: int = 0) -> bool:
        if self.eof:
            return False
        try:
            got = self.fh.read(max(self.chunk, at_least))
        except UnicodeDecodeError:
            raise GardenError(f"{self.where}: cannot read: not UTF-8 text (after character "
                              f"{self.offset + len(self.text):,})") from None
        except EOFError:
            raise GardenError(f"{self.where}: cannot read: the compressed stream ends early "
                              "(a truncated .gz file?)") from None
        except (OSError, zlib.error) as exc:
            raise GardenError(f"{self.where}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
        if not got:
            self.eof = True
            return False
        self.text += got
        return True

    def drop(self, pos: int) -> None:
        if pos <= 0:
            return
        gone = self.text[:pos]
        newlines = gone.count("\n")
        if newlines:
            self.line += newlines
            self.col = pos - gone.rfind("\n")
        else:
            self.col += pos
        self.offset += pos
        self.text = self.text[pos:]

    def at(self, pos: int) -> str:
        """`file:line:column` of text[pos]."""
        seg = self.text[:pos]
        newlines = seg.count("\n")
        if newlines:
            return f"{self.where}:{self.line + newlines}:{pos - seg.rfind(chr(10))}"
        return f"{self.where}:{self.line}:{self.col + pos}"

    def skip(self, pos: int) -> int:
        """The position of the next character that is not JSON whitespace, reading on as
        needed; len(text) at the end of the file. Whitespace read past is dropped."""
        while True:
            pos = _WS.match(self.text, pos).end()
            if pos < len(self.text):
                return pos
            self.drop(pos)
            pos = 0
            if not self.more():
                return len(self.text)

    def scan(self, index: int) -> None:
        """Read on until the element at text[0] is whole in the buffer, counting its values
        (each bracket or brace that opens one, each comma between two) without decoding it;
        GardenError past `max_values`. A scalar needs no scan; text that is not JSON stops
        the scan where it is, for the decoder to report."""
        if not self.text or self.text[0] not in "[{":
            return
        i, depth, values = 0, 0, 1
        while True:
            m = _TOKEN.match(self.text, i)
            if m is None:   # a string not closed within the buffer: read on
                if self.eof:
                    return
                self._grow(index)
                continue
            token, i = m.group(0), m.end()
            if token in "[{":
                depth += 1
                values += 1
            elif token in "]}":
                depth -= 1
                if depth <= 0:
                    return
            elif token == ",":
                values += 1
            if values > self.max_values:
                raise GardenError(f"{self.at(0)}: question #{index} holds more than {self.max_values:,} JSON "
                                  f"values, past the bound of one question record{self.values_hint}")
            if i >= len(self.text):
                if self.eof:
                    return
                self._grow(index)

    def decode(self, pos: int, index: int) -> tuple[Any, int]:
        """The element starting at text[pos] and the position after it."""
        self.drop(pos)
        self.scan(index)
        while True:
            self.dups = []
            try:
                value, end = self.decoder.raw_decode(self.text, 0)
            except json.JSONDecodeError as exc:
                near_end = exc.pos >= len(self.text) - 16
                if not self.eof and (near_end or exc.msg.startswith("Unterminated string")):
                    self._grow(index)
                    continue
                cut = "; the file ends inside it (truncated?)" if near_end or "Unterminated" in exc.msg else ""
                raise GardenError(f"{self.at(exc.pos)}: not JSON: {exc.msg} (in question #{index}{cut})") from None
            except RecursionError:
                raise GardenError(f"{self.at(0)}: not JSON this reader accepts: question #{index} is nested "
                                  "too deeply") from None
            if end == len(self.text) and not self.eof:   # a number may go on in the next read
                self._grow(index)
                continue
            return value, end

    def _grow(self, index: int) -> None:
        if len(self.text) > self.max_item:
            raise GardenError(f"{self.at(0)}: question #{index} is longer than {self.max_item:,} characters, "
                              "the bound of one question record")
        self.more(len(self.text))

    def items(self) -> Iterator[tuple[int, Any, list[str]]]:
        pos = self.skip(0)
        if pos < len(self.text) and self.text[pos] == "\ufeff":   # a byte-order mark
            pos = self.skip(pos + 1)
        if pos >= len(self.text):
            raise GardenError(f"{self.where}: empty: a LongMemEval file is a JSON list of question records")
        first = self.text[pos]
        if first != "[":
            what = {"{": "an object", '"': "a string", "t": "true", "f": "false", "n": "null"}.get(
                first, "a number" if first in "-0123456789" else None)
            if what is None:
                raise GardenError(f"{self.at(pos)}: not JSON: expecting '[' to open the list of question "
                                  f"records (found {shown(first)})")
            raise GardenError(f"{self.at(pos)}: the top level must be a JSON list of question records, "
                              f"not {what}")
        pos = self.skip(pos + 1)
        if pos >= len(self.text):
            raise GardenError(f"{self.at(pos)}: not JSON: the file ends inside the list, before its first "
                              "question record (truncated?)")
        if self.text[pos] == "]":
            self._finish(pos + 1)
            return
        index = 0
        while True:
            value, end = self.decode(pos, index)
            yield index, value, list(self.dups)
            pos = self.skip(end)
            if pos >= len(self.text):
                raise GardenError(f"{self.at(pos)}: not JSON: the file ends after question #{index}, before the "
                                  "list is closed (truncated?)")
            sep = self.text[pos]
            if sep == "]":
                self._finish(pos + 1)
                return
            if sep != ",":
                raise GardenError(f"{self.at(pos)}: not JSON: expecting ',' or ']' after question #{index} "
                                  f"(found {shown(sep)})")
            index += 1
            pos = self.skip(pos + 1)
            if pos >= len(self.text):
                raise GardenError(f"{self.at(pos)}: not JSON: the file ends where question #{index} should "
                                  "begin (truncated?)")
            if self.text[pos] == "]":
                raise GardenError(f"{self.at(pos)}: not JSON: a ',' with no question record after it")

    def _finish(self, pos: int) -> None:
        pos = self.skip(pos)
        if pos < len(self.text):
            raise GardenError(f"{self.at(pos)}: not JSON: extra data after the list (found "
                              f"{shown(self.text[pos:pos + 20])})")


def iter_json_list(fh, where: str, chunk_chars: int = CHUNK_CHARS, max_item_chars: int = MAX_ITEM_CHARS,
                   max_values: int = MAX_VALUES, values_hint: str = "") -> Iterator[tuple[int, Any, list[str]]]:
    """(index, element, keys written twice in it) for each element of the JSON list read
    from the text stream `fh`, one element in memory at a time, each of at most
    `max_item_chars` characters and `max_values` values (`values_hint` ends that refusal:
    what the bound stands for). Any syntax error, and any top level that is not a list,
    raises GardenError located by `where:line:column`."""
    yield from _Reader(fh, where, chunk_chars, max_item_chars, max_values, values_hint).items()


def open_text(path: Path):
    """The file as UTF-8 text, decompressed when it is gzip. The first two bytes decide,
    not the name, so a misnamed file is read all the same."""
    if Path(path).is_dir():
        raise GardenError(f"{path}: is a folder; give the LongMemEval .json or .json.gz file")
    raw = open_regular(path)   # a FIFO or a device is refused, never waited on or read
    try:
        magic = raw.read(2)
        raw.seek(0)
        if magic == b"\x1f\x8b":
            return io.TextIOWrapper(gzip.GzipFile(fileobj=raw, mode="rb"), encoding="utf-8", newline="")
        return io.TextIOWrapper(raw, encoding="utf-8", newline="")
    except OSError as exc:
        raw.close()
        raise GardenError(f"{path}: cannot read: {exc.strerror or exc}") from None


