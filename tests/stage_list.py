"""The stage list as garden/rerank/stages.py writes it: the names in its `STAGES =
stages_named(...)` call, read from the source with `ast` (never by importing it), so that a
test pins the order the list gives instead of writing it out again. A stage added to the
list is then pinned by the list alone."""
from __future__ import annotations

import ast
from pathlib import Path

STAGES_SOURCE = Path(__file__).resolve().parents[1] / "garden" / "rerank" / "stages.py"


def listed_stages(source: Path = STAGES_SOURCE) -> list[str]:
    """The names given to `stages_named` in the assignment to `STAGES`, in order."""
    tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == "STAGES" and isinstance(node.value, ast.Call):
            call = node.value
            assert isinstance(call.func, ast.Name) and call.func.id == "stages_named", ast.dump(call.func)
            names = [arg.value for arg in call.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
            assert len(names) == len(call.args), "the stage list names its stages literally"
            return names
    raise AssertionError(f"{source}: no `STAGES = stages_named(...)`")
