"""Reading YAML with located errors, and with bounds a hostile file cannot get past.

Stories and cases may come from anyone, so reading one must cost about what its size
says: a few hundred bytes of aliases must not expand into gigabytes of values (and of
messages repeating them), deep nesting must not exhaust the interpreter's stack, and a
value the parser cannot convert must become a located message, not a traceback.
"""
from __future__ import annotations

import hashlib
import marshal
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

import yaml
from yaml.events import AliasEvent, CollectionStartEvent, NodeEvent

from garden.text import one_line, shown, shown_id
from garden._files import open_regular
from garden.errors import GardenError

# The pure-Python parser reads roughly 0.2-1 MB a second, and a story is written by hand
# (the shipped ones are a few kilobytes), so 4 MiB bounds the time and memory of one read
# to seconds while leaving hundreds of times the room any story or case needs. Checked
# before the file is read; a file that grows while it is read is still cut at the bound.
MAX_FILE_BYTES = 4 * 1024 * 1024

# Stories nest four or five levels; 64 is far past any real file and far below the depth
# at which composing, building or validating the value would exhaust the interpreter's
# stack. It bounds the nesting once aliases are expanded too: an alias placed deep inside
# lists names a value that may itself be deep.
MAX_DEPTH = 64

# What aliases add once expanded: every alias counts the nodes plus the scalar characters
# of what it names, nested aliases included, as if the alias were replaced by a copy. A
# few shared lists or dates stay far below 100,000; a "billion laughs" file (nine
# aliases to nine aliases to ...) passes it within a few levels and is refused before
# anything is built, so neither validation nor a message can ever walk the expansion.
MAX_ALIAS_EXPANSION = 100_000

# Parsed files kept in memory, keyed by their text: a library caller, a notebook or a
# server asking many queries of one story reads it each time (the story may have changed),
# and the pure-Python parser costs about 0.1 s on a shipped story where a query costs a
# few milliseconds. Bounded by the marshalled size, least recently used dropped first.
MAX_PARSED_BYTES = 64 * 1024 * 1024
_parsed: OrderedDict[bytes, bytes] = OrderedDict()   # digest of the text -> marshalled data
_parsed_bytes = 0

_CORE_TAG = "tag:yaml.org,2002:"


class _Refused(yaml.MarkedYAMLError):
    """Well-formed YAML that the garden declines to read; located like a parse error."""


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(_CORE_TAG):] if tag.startswith(_CORE_TAG) else tag


class _Loader(yaml.SafeLoader):
    """SafeLoader that leaves timestamps as text, so an impossible date such as 2030-01-32
    reaches validation (and a located message) instead of crashing the parser, and that
    refuses a key written twice in one mapping, which plain YAML loading resolves silently
    by keeping the last value.

    While composing, before any value is built, it also refuses: nesting deeper than
    MAX_DEPTH, as written or once aliases are expanded; aliases whose expansion would add
    more than MAX_ALIAS_EXPANSION (see there), and an alias inside the node it names, which would make a value contain
    itself; and every explicit tag (`!!timestamp`, `!!float`, `!custom`, a bare `!`),
    since stories and cases need only plain YAML and an explicit tag is what turns a bad
    value into a converter's traceback (`!!float hi`). Values it still cannot convert
    (an integer too long to convert) are located errors too."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0                  # collections open around the node being composed
        self._shapes: dict = {}          # node -> (expanded size, nesting), once complete
        self._alias_expansion = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            self._count_alias(event)
            return super().compose_node(parent, index)
        if isinstance(event, NodeEvent) and event.tag is not None:
            tag = shown(_short_tag(event.tag), 40)
            raise _Refused(None, None, f"explicit YAML tags are not accepted (tag {tag}); write the plain value",
                           event.start_mark)
        if not isinstance(event, CollectionStartEvent):
            return super().compose_node(parent, index)
        if self._depth >= MAX_DEPTH:
            raise _Refused(None, None, f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def _count_alias(self, event):
        target = self.anchors.get(event.anchor)
        if target is None:  # the base class reports an undefined alias
            return
        # A collection gets its end mark only once composed: without one, the alias is
        # inside the node it names. (Anchor names are plain letters, digits, - and _.)
        if target.end_mark is None:
            raise _Refused(None, None, f"alias *{event.anchor} is inside the node it names", event.start_mark)
        size, height = self._shape(target)
        if self._depth + height > MAX_DEPTH:
            raise _Refused(None, None, f"nested more than {MAX_DEPTH} levels deep once alias *{event.anchor} "
                           "is expanded", event.start_mark)
        self._alias_expansion += size
        if self._alias_expansion > MAX_ALIAS_EXPANSION:
            raise _Refused(None, None, f"aliases expand past {MAX_ALIAS_EXPANSION:,} nodes and characters "
                           "(each alias counts all it names); write the values out", event.start_mark)

    def _shape(self, node) -> tuple[int, int]:
        """(nodes plus scalar characters, levels of collections) of `node` with every
        alias in it expanded. Computed once per node, and every aliased node was measured
        when its alias was read, so checking a bomb costs what its text costs and the
        recursion here goes no deeper than the text's own nesting."""
        known = self._shapes.get(node)
        if known is not None:
            return known
        if isinstance(node, yaml.ScalarNode):
            shape = (1 + len(node.value), 0)
        else:
            children = node.value if isinstance(node, yaml.SequenceNode) else [n for kv in node.value for n in kv]
            shapes = [self._shape(child) for child in children]
            shape = (1 + sum(s for s, _ in shapes), 1 + max((h for _, h in shapes), default=0))
        self._shapes[node] = shape
        return shape

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, OverflowError) as exc:
            value = shown(node.value, 40) if isinstance(node, yaml.ScalarNode) else "this value"
            reason = str(exc).split(":")[0]
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {value} as {_short_tag(node.tag)}: {reason}", node.start_mark) from None

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == _CORE_TAG + "merge":  # `<<: *base`: the base class merges it
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key; the base class reports it
                break
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {shown(key)} (first written on line {first})", key_node.start_mark)
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


_Loader.yaml_implicit_resolvers = {
    key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def read_yaml(path: Path) -> Any:
    """The data of one YAML file; GardenError with one located line on anything wrong."""
    text = _read_bounded(Path(path))
    key = hashlib.blake2b(text.encode("utf-8"), digest_size=20).digest()
    kept = _parsed.get(key)
    if kept is not None:
        _parsed.move_to_end(key)
        return marshal.loads(kept)   # a fresh copy: callers may change what they are given
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise GardenError(one_line(_yaml_message(path, text, exc))) from None
    except RecursionError:  # the depth bounds make this unreachable; a traceback would be worse
        raise GardenError(f"{path}: nested too deeply to read") from None
    _keep(key, data)
    return data


def _keep(key: bytes, data: Any) -> None:
    """Remember a parse; plain YAML values (no timestamps, no tags) always marshal."""
    global _parsed_bytes
    try:
        kept = marshal.dumps(data)
    except ValueError:  # not one of the plain types: read it again next time
        return
    if len(kept) > MAX_PARSED_BYTES:
        return
    _parsed[key] = kept
    _parsed_bytes += len(kept)
    while _parsed_bytes > MAX_PARSED_BYTES:
        _parsed_bytes -= len(_parsed.popitem(last=False)[1])


def _read_bounded(path: Path) -> str:
    try:
        with open_regular(path) as fh:   # a FIFO or a device is refused, never waited on or read
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise GardenError(_too_big(path, f"{size:,} bytes"))
            data = fh.read(MAX_FILE_BYTES + 1)   # it may have grown: never read past the bound
    except OSError as exc:
        raise GardenError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise GardenError(_too_big(path, "more than that"))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        byte = f"byte {exc.start + 1} is {data[exc.start]:#04x}"
        raise GardenError(f"{path}: cannot read: not UTF-8 text ({byte})") from None


def _too_big(path: Path, size: str) -> str:
    return f"{path}: file is {size}; a YAML file may have at most {MAX_FILE_BYTES:,} bytes"


def _yaml_message(path, text: str, exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.reader.ReaderError):  # located by offset, not by line
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        what = f"character {shown(chr(exc.character))}" if isinstance(exc.character, int) else "a byte"
        return f"{path}:{line}:{column}: malformed YAML: {what} is not allowed in YAML text"
    mark = getattr(exc, "problem_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if isinstance(exc, _Refused):
        return f"{where}: {problem}"
    context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context:  # "while parsing a flow sequence", "found duplicate anchor ...; first occurrence"
        on = f" on line {context_mark.line + 1}" if context_mark else ""
        problem = f"{problem} ({context}{on})"
    return f"{where}: malformed YAML: {problem}"


def describe_pydantic_error(err: dict) -> tuple[str, str]:
    """(field path, message with value) for one pydantic error, both one bounded line:
    field names and values come from the file, so they are escaped and cut."""
    field = ".".join(shown_id(p) for p in err.get("loc", ())) or "(top level)"
    if err.get("type") == "extra_forbidden":
        return field, f"unknown field (value {shown(err.get('input'))})"
    if err.get("type") == "missing":
        return field, "required field is missing"
    msg = err.get("msg", "invalid")
    if "ctx" in err and "error" in err["ctx"]:
        msg = str(err["ctx"]["error"])
    value = err.get("input")
    return field, f"{one_line(msg, 200)} (value {shown(value)})"


def validated(model, raw, where: str):
    """`model` validated from `raw`, or one GardenError listing every problem, each located
    as `WHERE: field F: message (value V)`."""
    from pydantic import ValidationError

    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            field, message = describe_pydantic_error(err)
            lines.append(f"{where}: field {field}: {message}")
        raise GardenError(lines) from None
