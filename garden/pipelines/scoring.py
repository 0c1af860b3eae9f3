"""Scores as pipelines use them: each member scored once, every value checked finite."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from garden.models import Packet
from garden.retrievers import FUSION, Eligible, as_retriever, check_finite


@dataclass
class Outcome:
    """A query's packet, the trace its stages wrote and their timings. An entry of the trace
    that costs more to make than the query's other stages, and that only a written trace or
    the explorer reads (every candidate's scores), is `deferred`: made the first time
    `stages` is read. `trace` is what is already there."""
    packet: Packet
    trace: dict = field(default_factory=dict)
    timings_ms: dict = field(default_factory=dict)
    deferred: dict = field(default_factory=dict)   # trace key -> a function that makes its entry

    @property
    def stages(self) -> dict:
        """The whole trace, the deferred entries made now (once)."""
        while self.deferred:
            key = next(iter(self.deferred))
            self.trace[key] = self.deferred.pop(key)()
        return self.trace


def scored(retriever, query: str, name: str | None = None,
           eligible: Eligible | None = None) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """(the retriever's scores, each member's scores), every member scored once: a fusing
    retriever fuses the members' scores instead of scoring them all again. A retriever
    that `pushes_down` is given `eligible` and leaves out what the query's hard rules
    exclude; any other scores every record, and the gate rejects.

    Every pipeline's retrieval passes here, so here every score is checked to be a finite
    number, members first, then the fused ones. A NaN or an infinity (a plugin's bug, or
    options pushed until a float overflows) is refused: a GardenError naming the
    retriever (`name`, the pipeline's spec, else the retriever's own name), the record and
    the value. It is not dropped, because a dropped record looks like an honest miss in
    every metric; and it cannot be kept, because IEEE 754 NaN compares false with
    everything (ranking, the standout ratio and packing would misorder in silence) and
    JSON (RFC 8259, section 6) cannot carry it into a packet or a trace."""
    # numpy's overflow and invalid-value warnings would be extra stderr lines beside the
    # one refusal below, which names the record; the check below is what catches them
    retriever = as_retriever(retriever)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        members = (retriever.components(query, eligible) if eligible is not None and retriever.pushes_down
                   else retriever.components(query))
    if retriever.kind != FUSION:
        fused = members[retriever.name]
        check_finite(name or retriever.name, fused)
        return fused, members
    for member, scores in members.items():
        check_finite(member, scores)
    fused = retriever.fuse(members)
    check_finite(name or retriever.name, fused)
    return fused, members
