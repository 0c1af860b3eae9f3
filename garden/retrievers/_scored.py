"""A query's scores as every pipeline reads them: each member scored once, every value
checked finite. The retrieve stage and the pipelines call it alike."""
from __future__ import annotations

import numpy as np

from garden.retrievers._protocol import FUSION, Eligible, as_retriever
from garden.retrievers._scores import check_finite


def scored(retriever, query: str, name: str | None = None, eligible: Eligible | None = None,
           depth: int | None = None) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """(the retriever's scores, each member's scores), every member scored once: a fusing
    retriever fuses the members' scores instead of scoring them all again. A retriever
    that `pushes_down` is given `eligible` and leaves out what the query's hard rules
    exclude; any other scores every record, and the eligibility check rejects. A `top_only` one is
    given `depth`, the most candidates the caller reads, and scores its best alone.

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
        told = eligible if eligible is not None and retriever.pushes_down else None
        members = (retriever.components(query, told, depth) if depth is not None and retriever.top_only
                   else retriever.components(query, told) if told is not None else retriever.components(query))
    if retriever.kind != FUSION:
        fused = members[retriever.name]
        check_finite(name or retriever.name, fused)
        return fused, members
    for member, scores in members.items():
        check_finite(member, scores)
    fused = retriever.fuse(members)
    check_finite(name or retriever.name, fused)
    return fused, members
