"""`garden new-story`: a story and a starter challenge case that check and run as written."""
from __future__ import annotations

import re
from pathlib import Path

from garden.formats.layout import CHALLENGE, STORY_FOLDER
from garden.errors import GardenError

STORY = """\
story: {name}
title: {title}
about: A fictional world for one contrast. Replace every record with your own.
project: {name}

topics:
  garden: {{aliases: [vegetable patch]}}
  weather: {{}}

entities:
  ada:
    name: Ada Quill
    aliases: [ada, ada quill]

records:
  - id: decision.{slug}.tomatoes
    kind: decision
    status: active
    decided_at: 2031-04-02
    topics: [garden]
    entities: [ada]
    text: Ada moved the tomato seedlings to the south bed.
    rationale: The north bed stays wet after the afternoon rain.
    sources: [chat.{slug}.0402]
  - id: chat.{slug}.0402
    kind: source
    at: 2031-04-02
    topics: [garden]
    entities: [ada]
    text: "Ada: the north bed is a puddle again; I am carrying the tomatoes over to the south side."
  - id: state.{slug}.rain
    kind: state
    stability: temporary
    status: active
    observed_at: 2031-04-03
    valid_from: 2031-04-03
    topics: [weather]
    text: It has rained every afternoon this week, so the seedlings stay wet.
  - id: log.{slug}.import
    kind: control
    at: 2031-04-03
    title: Import report for the first two records.
"""

CASE = """\
id: {name}-starter
story: {name}
about: Starter case. The decision to move the seedlings leads, its source follows it.
origin: scaffolded by garden new-story
category: starter
as_of: 2031-04-05
budget: 600
query: Why did Ada move the tomato seedlings?
expect:
  decision: retrieve
  lead: decision.{slug}.tomatoes
  labels: {{chat.{slug}.0402: [provenance_supported]}}
controls:
  - name: a definitional question needs no history
    query: what does seedling mean?
    expect: {{decision: skip}}
"""


def new_story(name: str, root: Path = Path(".")) -> tuple[Path, Path]:
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
        raise GardenError(f"story name {name!r}: use lower-case letters, digits and dashes")
    story_path = root / STORY_FOLDER / f"{name}.yaml"
    case_path = root / CHALLENGE / f"{name}-starter.yaml"
    for path in (story_path, case_path):
        if path.exists():
            raise GardenError(f"{path} already exists; nothing written")
    slug = name.replace("-", "_")
    title = name.replace("-", " ").title()
    story_path.parent.mkdir(parents=True, exist_ok=True)
    case_path.parent.mkdir(parents=True, exist_ok=True)
    story_path.write_text(STORY.format(name=name, slug=slug, title=title), encoding="utf-8")
    case_path.write_text(CASE.format(name=name, slug=slug), encoding="utf-8")
    return story_path, case_path
