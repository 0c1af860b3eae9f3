"""Reading YAML with located errors."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import GardenError


class _Loader(yaml.SafeLoader):
    """SafeLoader that leaves timestamps as text, so an impossible date such as 2030-01-32
    reaches validation (and a located message) instead of crashing the parser, and that
    refuses a key written twice in one mapping, which plain YAML loading resolves silently
    by keeping the last value."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key; the base class reports it
                break
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first written on line {first})", key_node.start_mark)
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


_Loader.yaml_implicit_resolvers = {
    key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def read_yaml(path: Path) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GardenError(f"{path}: no such file") from None
    except (IsADirectoryError, UnicodeDecodeError, PermissionError) as exc:
        raise GardenError(f"{path}: cannot read: {exc}") from None
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise GardenError(f"{where}: malformed YAML: {problem}") from None


def describe_pydantic_error(err: dict) -> tuple[str, str]:
    """(field path, message with value) for one pydantic error."""
    field = ".".join(str(p) for p in err.get("loc", ())) or "(top level)"
    if err.get("type") == "extra_forbidden":
        return field, f"unknown field (value {err.get('input')!r})"
    if err.get("type") == "missing":
        return field, "required field is missing"
    msg = err.get("msg", "invalid")
    if "ctx" in err and "error" in err["ctx"]:
        msg = str(err["ctx"]["error"])
    value = err.get("input")
    return field, f"{msg} (value {value!r})"
