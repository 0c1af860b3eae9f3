"""schemas/ is generated from the models; a stale file fails here."""
from __future__ import annotations

from pathlib import Path

import pytest

from garden.formats.schemas import SCHEMAS, schema_text

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schema_file_is_current(name):
    path = SCHEMA_DIR / f"{name}.schema.json"
    assert path.is_file(), f"{path} is missing: run `garden schemas`"
    assert path.read_text(encoding="utf-8") == schema_text(SCHEMAS[name]), (
        f"{path} is stale: run `garden schemas`")


def test_no_schema_file_without_a_model():
    names = {p.name.removesuffix(".schema.json") for p in SCHEMA_DIR.glob("*.schema.json")}
    assert names == set(SCHEMAS)
