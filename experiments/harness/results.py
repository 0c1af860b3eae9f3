"""Results saved with what made them: the commit and the machine.

A figure means little without the code that computed it and the processor it ran on (the
int8 encoder's lead over torch depends on whether the processor has VNNI): `write_json`
adds both under "run", beside the figures, never in place of one. The rows an experiment
saves to choose again from (`--reuse`) are its inputs, not results: they are written as
they were, and a result made from them again carries the stamp of the run that makes it.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
# the extensions that choose kernels (numpy's, onnxruntime's, torch's), as /proc/cpuinfo names them
FLAGS = ("sse4_2", "avx", "fma", "avx2", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "avx_vnni",
         "amx_tile", "amx_int8")


def commit(project: Path = PROJECT) -> str:
    """The checked-out commit, `-dirty` when the tree has changes; "unknown" outside git."""
    try:
        done = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"], cwd=project,
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "unknown"


def cpu_facts(cpuinfo: str) -> dict:
    """The processor's model and which of FLAGS it has, from the text of /proc/cpuinfo."""
    model, flags = "", set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and not model:
            model = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = set(value.split())
    return {"cpu": model or platform.processor() or platform.machine(), "flags": [f for f in FLAGS if f in flags]}


def machine() -> dict:
    """The processor, its extensions, the cores present and the cores this process may use."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        cpuinfo = ""
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 1
    return {**cpu_facts(cpuinfo), "cores": os.cpu_count(), "usable_cores": usable, "system": platform.system()}


def stamped(result: dict) -> dict:
    """`result` with "run": the commit and the machine; a result that has one already (a
    saved run shown again) keeps the stamp of the run that measured it."""
    return result if "run" in result else {**result, "run": {"commit": commit(), "machine": machine()}}


def write_json(path: str | Path, result: dict, indent: int | None = 2) -> Path:
    """`result`, stamped, written to `path` (its folder made); the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stamped(result), indent=indent), encoding="utf-8")
    return path
