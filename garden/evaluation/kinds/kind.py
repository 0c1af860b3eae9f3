"""What a benchmark kind is, and the one refusal of an option a kind does not take.

Every kind takes the shared options (`plot`, `metrics`, `trec_dir`: its figures drawn,
measured by the ir-measures names given, its runs and qrels written as TREC files); the
rest belong to the kinds that declare them. An option given to a kind that does not take
it is refused in one line naming the option, what it does, and the kind.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from garden.errors import GardenError

SHARED = ("plot", "metrics", "trec_dir")


@dataclass(frozen=True)
class Options:
    """Options a kind takes together, and what they do: said when another kind is given
    them ("select events of traces")."""

    names: tuple[str, ...]
    does: str


@dataclass(frozen=True)
class Kind:
    """A benchmark kind. `compare(path, pipelines, baseline, **options)` returns a report
    with `to_json()` and `show()`; it is given only the options the kind takes, and only
    those set."""

    name: str                                   # as `source_kind` names it, and the user too
    title: str                                  # as the figures name it ("LoCoMo")
    compare: Callable[..., object]
    options: tuple[Options, ...] = ()
    # an option another kind takes -> why this one does not, said after the shared refusal
    declines: Mapping[str, str] = field(default_factory=dict)
    references: tuple[str, ...] = ()            # pipelines of its own beside the registry's
    # for a kind garden/formats/sources.py does not know: the marker a path carries, or None
    marker: Callable[[Path], str | None] | None = None
    # of a kind of case files: case id -> pipeline -> passed, what `ablate` says a stage decides
    case_verdicts: Callable[[Path, list[str]], dict[str, dict[str, bool]]] | None = None
    # of a kind of stores asking their own judged questions: its stores (`garden tune` folds over
    # them), and the depth its turn rankings are judged to
    stores: Callable[[Path], list] | None = None
    depth: int = 100

    def takes(self, option: str) -> bool:
        return option in SHARED or any(option in group.names for group in self.options)


def listed(names: list[str]) -> str:
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"


def refuse_options(kind: Kind, source: str, given: Mapping[str, object], kinds: Mapping[str, Kind]) -> None:
    """GardenError, one line naming the kind, for the group of the first of `given` options
    `kind` does not take."""
    refused = [name for name in given if not kind.takes(name)]
    if not refused:
        return
    groups = [group for other in kinds.values() for group in other.options]
    owner = next((g for g in groups if refused[0] in g.names), None)
    if owner is None:
        raise GardenError(f"`{refused[0]}`: no kind of source takes this option")
    names = list(owner.names)   # the whole group: what it is for is said of them together
    why = "; ".join(dict.fromkeys(kind.declines[n] for n in names if n in kind.declines))
    them = "it" if len(names) == 1 else "them"
    raise GardenError(f"{source}: {listed(names)} {owner.does}; the {kind.name} kind does not take {them}"
                      + (f": {why}" if why else ""))
