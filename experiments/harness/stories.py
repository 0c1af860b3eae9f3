"""The generated stories the scale experiments time, made once per work folder and shared
(experiments/scale.py, milvus_scale.py, query_cost.py): `garden generate` at a size, with
SEED, and the cases it writes beside the story."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from experiments.harness.timing import timed

PROJECT = Path(__file__).resolve().parents[2]
WORK = PROJECT / "experiments" / "out" / "scale"
SEED = 7


def size_options(parser: argparse.ArgumentParser, sizes: str, work: Path, saved: Path, again: str) -> None:
    """The options every experiment over generated stories takes: `--sizes` (comma-separated
    record counts), `--work` (where the stories and their garden home live), `--json` (where
    the figures are saved) and `--again` (show a saved run's figures instead: `again` says
    what it shows)."""
    parser.add_argument("--sizes", default=sizes, help=f"record counts, comma-separated (default {sizes})")
    parser.add_argument("--work", default=str(work), help="where the generated stories and their garden home live")
    parser.add_argument("--json", default=str(saved), help=f"where the figures are saved (default {saved})")
    parser.add_argument("--again", metavar="JSON", help=again)


def story_at(size: int, work: Path) -> tuple[Path, Path]:
    """The generated story and its cases for `size`, made once per work folder (the seconds
    it took kept in `generated.json` beside them)."""
    from garden.formats.generate import generate

    root = work / f"r{size}"
    name = f"scale-{size}"
    story, cases = root / "fixtures" / f"{name}.jsonl", root / "cases" / name
    if not story.exists() or not cases.is_dir():
        seconds, _ = timed(lambda: generate(name, size, SEED, out=story, force=True))
        (root / "generated.json").write_text(json.dumps({"seconds": seconds}))
    return story, cases


def case_queries(cases_dir: Path, story, story_path: Path | None = None) -> tuple[list, list]:
    """Every generated case's queries that build (the case and its controls) as query specs
    on `story`, and beside each its (case id, expectation): what every run times. Given the
    story's file (`story_path`), the records each case names are checked against `story`,
    the one this process holds, not the file parsed again for every case file."""
    from garden.formats.cases import load_case, spec_for

    held = {story_path: story} if story_path is not None else None
    specs, expects = [], []
    for case_file in sorted(cases_dir.glob("*.yaml")):
        loaded = load_case(case_file, held)
        queries = [q for q in loaded.queries if not q.expect.build_error]
        specs += [spec_for(q, story) for q in queries]
        expects += [(loaded.id, q.expect) for q in queries]
    return specs, expects
