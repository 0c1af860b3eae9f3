"""JSON Schema files generated from the pydantic models; a test keeps them current."""
from __future__ import annotations

import json
from pathlib import Path

from garden.models import Packet, Story
from garden.formats.cases import Case
from garden.pipelines.traces import TraceEvent

SCHEMAS = {"story": Story, "case": Case, "packet": Packet, "trace-event": TraceEvent}


def schema_text(model) -> str:
    # a packet is what the garden writes, its worked-out fields (outcome, silent) included
    mode = "serialization" if model is Packet else "validation"
    return json.dumps(model.model_json_schema(mode=mode), indent=2, sort_keys=True) + "\n"


def write_schemas(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in SCHEMAS.items():
        path = out / f"{name}.schema.json"
        path.write_text(schema_text(model), encoding="utf-8")
        written.append(path)
    return written
