"""The Memory Graph Explorer: one query drawn as a graph and stepped through stage by stage,
as one self-contained HTML page (see scene.py for the data, page.py for the page)."""
from __future__ import annotations

import datetime as dt

from garden.explore.page import render
from garden.explore.scene import MAX_NODES, build_scene

__all__ = ["explore", "write_explorer", "build_scene", "render", "MAX_NODES"]


def explore(story: str | None = None, query: str | None = None, *, as_of: dt.date | str | None = None,
            pipeline: str = "default", baseline: str = "bm25s", case: str | None = None) -> str:
    """The explorer's page (HTML text) for `query` on `story`, or for a case's query and its
    controls (`case`: a case file, or a case id in regression/ or challenge/)."""
    from garden.derived.home import check_environment
    from garden.formats.query_inputs import read_as_of

    check_environment()
    as_of = read_as_of(as_of)   # read as the query commands, the API and a server read it
    return render(build_scene(story, query, as_of=as_of, pipeline=pipeline, baseline=baseline, case=case))


def write_explorer(out, story: str | None = None, query: str | None = None, *, as_of=None,
                   pipeline: str = "default", baseline: str = "bm25s", case: str | None = None,
                   trace: str | None = None, question: str | None = None, trace_source: str | None = None) -> str:
    """Write the explorer's page to `out`; one line saying what was written. `trace` and
    `question` (its number, qid or text) draw a traced question instead of `story` and
    `query`."""
    from pathlib import Path

    from garden.errors import GardenError
    from garden.explore.page import render as _render

    from garden.derived.home import check_environment, write_whole

    check_environment()
    path = Path(out)
    if path.is_dir():
        raise GardenError(f"--out {path}: is a folder; name the HTML file to write")
    if not path.parent.is_dir():
        raise GardenError(f"--out {path}: folder {path.parent} does not exist")
    scene = build_scene(story, query, as_of=as_of, pipeline=pipeline, baseline=baseline, case=case, trace=trace,
                        question=question, trace_source=trace_source)
    try:   # a temporary file made exclusively: a link planted beside --out is never written through
        write_whole(path, _render(scene).encode("utf-8"))
    except OSError as exc:
        raise GardenError(f"--out {path}: cannot write: {exc.strerror or exc}") from None
    d, lo = scene["drawn"], scene["left_out"]
    return (f"wrote {path}: {len(scene['steps'])} steps; drew {d['records']} of {scene['store']['records']} records, "
            f"{d['topics']} topics, {d['people']} people ({lo['candidates']} candidates and {lo['linked']} "
            f"linked records left out)")
