"""The writes an agent makes to the quarry hut's memory (cases/written-memory/), in order:
one walk-through, made by every test that writes through a door, so that what each door
writes can be compared with the story the contrast case reads.

Each step is (tool, arguments); a `$N` in an argument is the id the N-th step answered.
The forget is dated by the server's clock: the story's control record carries FORGOTTEN_ON,
which a test against a server on today's date substitutes.
"""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "cases" / "written-memory"
BASE = CASES / "base" / "quarry-hut.jsonl"      # the keepers' own lines, before any write
WRITTEN = CASES / "quarry-hut.jsonl"            # after the walk-through: what the case reads
FORGOTTEN_ON = "2031-12-04"
STORY = "quarry-hut"

STEPS = [
    ("remember", {"story": STORY, "kind": "decision", "at": "2031-10-02", "topics": ["heating"], "entities": ["oskar"],
                  "text": "Heating: the hut is heated with the wood stove in the common room; Oskar splits the logs."}),
    ("remember", {"story": STORY, "kind": "state", "at": "2031-10-02", "topics": ["water"],
                  "text": "The cistern is full and the spring runs clear."}),
    ("remember", {"story": STORY, "at": "2031-11-14", "topics": ["heating"], "entities": ["oskar"],
                  "text": "Oskar: the stove's flue cracked in the first frost; we let the fire go out."}),
    ("remember", {"story": STORY, "kind": "decision", "at": "2031-11-15", "topics": ["heating"], "supersedes": "$1",
                  "text": "Heating: the hut is heated with the pellet boiler now; the stove stays cold until the "
                          "flue is relined."}),
    ("remember", {"story": STORY, "kind": "state", "at": "2031-12-03", "topics": ["water"], "supersedes": "$2",
                  "text": "The cistern is frozen solid; carry water up from the village in canisters."}),
    ("remember", {"story": STORY, "kind": "note", "at": "2031-12-03", "private": True, "entities": ["ines"],
                  "text": "The code of the quarry gate's padlock is 4471, Ines says."}),
    ("forget", {"story": STORY, "id": "$6"}),
]


def arguments(step: dict, answered: list[str], story: str = STORY) -> dict:
    """A step's arguments, for `story`, with each `$N` replaced by the id the N-th step answered."""
    step = {**step, "story": story}
    return {k: answered[int(v[1:]) - 1] if isinstance(v, str) and v.startswith("$") else v for k, v in step.items()}


def walk(call, story: str = STORY) -> list[str]:
    """Make every step, on `story` (a copy of the base under another name), with
    `call(tool, arguments) -> answer` (a dict with `id`); the ids answered, in order (for a
    forget: the control record's)."""
    answered: list[str] = []
    for tool, step in STEPS:
        answer = call(tool, arguments(step, answered, story))
        answered.append(answer["control"] if tool == "forget" else answer["id"])
    return answered


def base_copy(folder: Path, story: str = STORY) -> Path:
    """The base story in `folder` under the name `story` (the name is the file's stem)."""
    text = BASE.read_text(encoding="utf-8").replace(f'"story": "{STORY}"', f'"story": "{story}"', 1)
    path = folder / f"{story}.jsonl"
    path.write_text(text, encoding="utf-8")
    return path


def same_story(path: Path, today: str = FORGOTTEN_ON) -> bool:
    """Whether the story at `path` holds exactly the case's (under its own name), its forget dated `today`."""
    expected = WRITTEN.read_text(encoding="utf-8").replace(FORGOTTEN_ON, today)
    expected = expected.replace(f'"story": "{STORY}"', f'"story": "{path.stem}"', 1)
    return path.read_text(encoding="utf-8") == expected
