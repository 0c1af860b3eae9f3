"""Stories as JSON Lines (garden/formats/jsonl_reader.py): the same story as its YAML, read
and validated the same way, bad lines located by file and line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from garden.cli import main
from garden.errors import GardenError
from garden.formats.jsonl_reader import MAX_LINE_BYTES
from garden.formats.stories import load_story, resolve_story_path
from garden.formats.yaml_reader import read_yaml

ROOT = Path(__file__).resolve().parents[1]


def as_lines(yaml_path: Path, out: Path) -> Path:
    raw = read_yaml(yaml_path)
    header = {k: v for k, v in raw.items() if k != "records"}
    lines = [json.dumps(header, ensure_ascii=False)] + [json.dumps(r, ensure_ascii=False) for r in raw["records"]]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


@pytest.mark.parametrize("name", ["aurora-ridge", "saltmarsh-ferry"])
def test_a_story_in_json_lines_is_the_same_story(tmp_path, name):
    yaml_path = ROOT / "fixtures" / f"{name}.yaml"
    (tmp_path / "attachments").mkdir()
    if (ROOT / "fixtures" / "attachments").is_dir():  # attachments resolve from the story's folder
        import shutil

        shutil.copytree(ROOT / "fixtures" / "attachments", tmp_path / "attachments", dirs_exist_ok=True)
    lines = as_lines(yaml_path, tmp_path / f"{name}.jsonl")
    assert load_story(lines).model_dump() == load_story(yaml_path).model_dump()


def test_a_story_name_finds_its_json_lines_file_and_check_accepts_it(project, capsys):
    as_lines(project / "fixtures" / "aurora-ridge.yaml", project / "fixtures" / "aurora-lines.jsonl")
    path = project / "fixtures" / "aurora-lines.jsonl"
    path.write_text(path.read_text(encoding="utf-8").replace('"story": "aurora-ridge"', '"story": "aurora-lines"', 1),
                    encoding="utf-8")
    assert resolve_story_path("aurora-lines").resolve() == path.resolve()
    assert main(["check", "aurora-lines"]) == 0
    capsys.readouterr()
    assert main(["query", "aurora-lines", "Why have I not felt like gaming recently?", "--json",
                 "--pipeline", "bm25s"]) == 0
    assert json.loads(capsys.readouterr().out)["items"][0]["id"] == "state.mira.gaming"


@pytest.mark.parametrize("text, message", [
    ("", "empty; a story's first line is its header"),
    ('[1, 2]\n', ":1: the first line is the story's header"),
    ('{"story": "s", "project": "p", "records": []}\n', ":1: the first line is the story's header"),
    ('{"story": "s", "project": "p"}\n{"id": "a", "kind": "note", "text": "x"\n', ":2: not a JSON line"),
    ('{"story": "s", "project": "p"}\n' + "[" * 100 + "]" * 100 + "\n", ":2: nested more than 64 levels"),
    ('{"story": "s", "project": "p"}\n\xff\n', ":2: not"),
    ('{"story": "s", "project": "p"}\n{"id": "a", "kind": "note", "id": "b"}\n', ":2: key 'id' is written twice"),
])
def test_bad_lines_are_located(tmp_path, text, message):
    path = tmp_path / "s.jsonl"
    path.write_bytes(text.encode("utf-8", errors="surrogateescape") if "\xff" not in text
                     else text.encode("latin-1"))
    with pytest.raises(GardenError) as err:
        load_story(path)
    assert message in err.value.messages[0] and str(path) in err.value.messages[0]


def test_a_line_past_the_bound_is_refused_without_reading_it_whole(tmp_path):
    path = tmp_path / "s.jsonl"
    with path.open("w") as fh:
        fh.write('{"story": "s", "project": "p"}\n')
        fh.write('{"id": "a", "kind": "note", "text": "' + "x" * (MAX_LINE_BYTES + 10) + '"}\n')
    with pytest.raises(GardenError, match=r"s.jsonl:2: line is longer than"):
        load_story(path)


def test_a_record_error_names_the_record_and_field(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('{"story": "s", "project": "p"}\n{"id": "a", "kind": "nonsense", "text": "x"}\n')
    with pytest.raises(GardenError) as err:
        load_story(path)
    assert any("s.jsonl: record a: field kind" in m for m in err.value.messages), err.value.messages
