"""The house: every import of the garden runs downhill, and none closes a circle.

The rule and the table are docs/layers.md; `LAYERS` below is the same table, and a test
holds the two equal. Imports are read from the source with `ast`, never by importing it,
so a module that would fail to load, or load only in some order, is still read whole.

What counts as an import of a module of the garden:
- every `import` and `from ... import` statement naming one, wherever it stands: at the
  top, inside a function (a lazy import that runs upward is still an upward import), or
  under `if TYPE_CHECKING:`;
- `importlib.import_module` with a literal name, or an f-string whose literal start names
  a package of the garden (the stage list loads its stages by name): an import of the
  longest module that literal names.
An import under `if TYPE_CHECKING:` never runs, but it is an import all the same: it is held
to the direction rule and it closes a circle like any other (a circle a type checker must
walk is a circle a reader must walk too).

A package's `__init__` runs before any module of it: that is Python's order, not an import
the module writes, so it is no edge here. The root package's `__init__` re-exports the API
and sits in the top layer; a subpackage's `__init__` sits in its package's layer, and its
own imports obey the rule like any module's.
"""
from __future__ import annotations

import ast
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]
DOCS = PROJECT / "docs" / "layers.md"

# Bottom to top. An entry names a module or a package (every module below it); the longest
# entry that covers a module gives its layer. `garden` is the root package's own
# `__init__` only. A package sits in one layer whole: no entry names a module of a package
# another entry names (`test_a_package_sits_in_one_layer`).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("data model and I/O primitives", ("garden.models", "garden.errors", "garden.text", "garden.analyzer",
                                       "garden._files", "garden._state", "garden._notice", "garden._bulk",
                                       "garden._deadline", "garden._terminal")),
    ("derived files", ("garden.derived",)),
    ("retrievers", ("garden.retrievers",)),
    ("stages", ("garden.rerank",)),
    ("pipelines", ("garden.pipelines",)),
    ("formats", ("garden.formats",)),
    ("store", ("garden.store",)),
    ("evaluation", ("garden.evaluation",)),
    ("API, report and explorer", ("garden.api", "garden.report", "garden.explore")),
    ("server", ("garden.serve",)),
    ("command line", ("garden", "garden.cli")),
)


@dataclass(frozen=True)
class Import:
    source: str        # the importing module
    target: str        # the imported module of the garden
    path: str          # the importing file, relative to the root
    line: int
    text: str          # the statement as written
    type_only: bool    # under `if TYPE_CHECKING:`: never runs


def modules(root: Path) -> dict[str, Path]:
    """Module name -> file, for every module of the garden package under `root`."""
    found = {}
    for path in sorted((root / "garden").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _known(name: str, known: dict[str, Path]) -> str | None:
    """The longest module of the garden that `name` names (itself, or a package holding it)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _dynamic_name(call: ast.Call) -> str | None:
    """The literal module name (or the literal start of an f-string) of an
    `importlib.import_module(...)` call, or None."""
    func = call.func
    named = (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id == "import_module")
    if not named or not call.args:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value).rstrip(".")
    return None


def read_imports(root: Path) -> list[Import]:
    """Every import of a module of the garden that a module of the garden makes (see the
    module docstring for what counts)."""
    known = modules(root)
    out: list[Import] = []
    for name, path in known.items():
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        rel = path.relative_to(root).as_posix()

        def add(target_name: str, node: ast.AST, type_only: bool) -> None:
            target = _known(target_name, known)
            if target is not None and target != name:
                out.append(Import(name, target, rel, node.lineno, lines[node.lineno - 1].strip(), type_only))

        def walk(node: ast.AST, type_only: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and _is_type_checking(child.test):
                    for stmt in child.body:
                        walk_one(stmt, True)
                    for stmt in child.orelse:
                        walk_one(stmt, type_only)
                else:
                    walk_one(child, type_only)

        def walk_one(node: ast.AST, type_only: bool) -> None:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name, node, type_only)
            elif isinstance(node, ast.ImportFrom):
                if node.level:   # relative: from the package `level - 1` steps up
                    base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    head = ".".join(base + ([node.module] if node.module else []))
                else:
                    head = node.module or ""
                for alias in node.names:
                    # `from garden.x import y`: the module garden.x.y when there is one
                    add(f"{head}.{alias.name}" if f"{head}.{alias.name}" in known else head, node, type_only)
            elif isinstance(node, ast.Call):
                dynamic = _dynamic_name(node)
                if dynamic is not None:
                    add(dynamic, node, type_only)
            walk(node, type_only)

        walk(ast.parse(source, filename=rel), False)
    return [i for i in out if i.target.split(".")[0] == "garden"]


def layer_of(module: str) -> int | None:
    """The index in LAYERS of the module's layer, or None when no entry covers it."""
    best: tuple[int, int] | None = None   # (entry length, layer)
    for index, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            covers = module == entry or (entry != "garden" and module.startswith(entry + "."))
            if covers and (best is None or len(entry) > best[0]):
                best = (len(entry), index)
    return None if best is None else best[1]


def _layer_name(index: int) -> str:
    return f"{LAYERS[index][0]} (layer {index + 1})"


def upward_imports(root: Path) -> list[str]:
    """One line per import that runs from a lower layer up to a higher one."""
    problems = []
    for imp in read_imports(root):
        have, want = layer_of(imp.source), layer_of(imp.target)
        if have is not None and want is not None and want > have:
            problems.append(f"{imp.path}:{imp.line}: {imp.source} imports {imp.target} (`{imp.text}`): "
                            f"{_layer_name(have)} must not import {_layer_name(want)}")
    return problems


def import_cycles(root: Path, type_only: bool = True) -> list[str]:
    """One line per circle of imports (those under TYPE_CHECKING too; without `type_only`,
    only those that run), naming its modules in order and the import that makes each step."""
    edges: dict[str, dict[str, Import]] = {}
    for imp in read_imports(root):
        if type_only or not imp.type_only:
            edges.setdefault(imp.source, {}).setdefault(imp.target, imp)
    out = []
    for group in _strongly_connected(edges):
        if len(group) < 2:
            continue
        start = min(group)
        path = _path_back(edges, start, set(group))
        steps = "; ".join(f"{edges[a][b].path}:{edges[a][b].line} `{edges[a][b].text}`" for a, b in zip(path, path[1:]))
        out.append(f"import cycle: {' -> '.join(path)} ({steps})")
    return out


def _strongly_connected(edges: dict[str, dict[str, Import]]) -> list[list[str]]:
    """Tarjan's strongly connected components, without recursion."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    nodes = sorted(set(edges) | {t for targets in edges.values() for t in targets})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                groups.append(sorted(group))
    return groups


def _path_back(edges: dict[str, dict[str, Import]], start: str, group: set[str]) -> list[str]:
    """The shortest circle from `start` back to itself inside one strongly connected group."""
    came: dict[str, str | None] = {start: None}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(edges.get(node, {})):
                if target == start:
                    path = [node]
                    while came[path[-1]] is not None:
                        path.append(came[path[-1]])
                    return [*reversed(path), start]
                if target in group and target not in came:
                    came[target] = node
                    following.append(target)
        frontier = following
    raise AssertionError(f"{start} is on no circle")


def planted(tmp_path: Path, edits: dict[str, str]) -> Path:
    """A copy of the garden's source with `edits` (file -> lines appended) planted in it."""
    shutil.copytree(PROJECT / "garden", tmp_path / "garden", ignore=shutil.ignore_patterns("__pycache__"))
    for rel, text in edits.items():
        path = tmp_path / rel
        path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")
    return tmp_path


# --- the garden as it is ---------------------------------------------------------------------


def test_no_import_cycle_among_the_gardens_modules():
    cycles = import_cycles(PROJECT)
    assert not cycles, "\n".join(cycles)


def test_every_import_runs_downhill():
    problems = upward_imports(PROJECT)
    assert not problems, "\n".join(problems)


def test_every_module_has_a_layer_and_every_entry_names_a_module():
    known = modules(PROJECT)
    uncovered = [m for m in known if layer_of(m) is None]
    assert not uncovered, f"no layer covers {', '.join(uncovered)}: add it to LAYERS and to docs/layers.md"
    entries = [e for _, listed in LAYERS for e in listed]
    assert len(entries) == len(set(entries))
    stale = [e for e in entries if e not in known]
    assert not stale, f"LAYERS names what is not a module or package of the garden: {stale}"


def test_a_package_sits_in_one_layer():
    """No entry names a module inside a package another entry names: a module that belongs
    to another layer moves to that layer's package (or its shared piece moves down)."""
    entries = [e for _, listed in LAYERS for e in listed if e != "garden"]
    inside = sorted(f"{e} (inside {o})" for e in entries for o in entries if e.startswith(o + "."))
    assert not inside, f"an entry inside another layer's package: {', '.join(inside)}"


def test_a_query_loads_no_stage():
    """`QuerySpec` is a plain value: importing it loads neither the stage list nor a stage
    (the pipeline resolves its settings)."""
    import subprocess
    import sys

    code = ("import sys; import garden.rerank.query; "
            "print(sorted(m for m in sys.modules if m.startswith('garden.rerank.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PROJECT)
    assert out.stdout.strip() == "['garden.rerank.query']"


def test_the_docs_table_is_this_table():
    """docs/layers.md lists the same layers, in the same order, with the same modules."""
    rows = [line for line in DOCS.read_text(encoding="utf-8").splitlines() if re.match(r"\| \d+ \| ", line)]
    documented = []
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        names = []
        for path in re.findall(r"`(garden[^`]*)`", cells[2]):
            name = path.removesuffix("/").removesuffix(".py").removesuffix("/__init__").replace("/", ".")
            names.append(name)
        documented.append((int(cells[0]), cells[1], sorted(names)))
    assert documented == [(i + 1, name, sorted(entries)) for i, (name, entries) in enumerate(LAYERS)]


def test_the_stage_list_is_read_as_importing_its_stages():
    """`importlib.import_module(f"garden.rerank.{name}")` counts as an import of the
    stages' package, so a stage list moved to a lower layer would be caught."""
    found = [i for i in read_imports(PROJECT) if i.source == "garden.rerank.stages" and "import_module" in i.text]
    assert [i.target for i in found] == ["garden.rerank"]


# --- the checker fails on what it is there to catch --------------------------------------------


def test_a_planted_cycle_is_named_with_its_imports(tmp_path):
    """The cache importing the home again, whose environment check imports the cache."""
    root = planted(tmp_path, {"garden/derived/cache.py": "\nfrom garden.derived.home import derived_dir  # noqa\n"})
    cycles = import_cycles(root)
    line = _last_line(root / "garden/derived/cache.py")
    assert len(cycles) == 1, cycles
    assert cycles[0].startswith(
        "import cycle: garden.derived.cache -> garden.derived.home -> garden.derived.cache "
        f"(garden/derived/cache.py:{line} `from garden.derived.home import derived_dir  # noqa`; "
        "garden/derived/home.py:"), cycles[0]
    assert "`from garden.derived.cache import " in cycles[0]


def test_the_old_circle_of_the_models_and_the_stages_fails_both_rules(tmp_path):
    """The models reading the stage list again: a circle through the stages' modules, and an
    import from the data model up to the stages."""
    root = planted(tmp_path, {"garden/models.py": "\nfrom garden.rerank.stages import LABELS  # noqa\n"})
    cycles = import_cycles(root)
    assert len(cycles) == 1 and cycles[0].startswith("import cycle: garden.models -> garden.rerank.stages -> ")
    line = _last_line(root / "garden/models.py")
    assert upward_imports(root) == [
        f"garden/models.py:{line}: garden.models imports garden.rerank.stages "
        "(`from garden.rerank.stages import LABELS  # noqa`): data model and I/O primitives (layer 1) must not import "
        "stages (layer 4)"]


def test_a_lazy_upward_import_is_an_upward_import(tmp_path):
    lazy = "\n\ndef _later():\n    from garden.pipelines.scoring import Outcome\n    return Outcome\n"
    root = planted(tmp_path, {"garden/rerank/retrieve.py": lazy})
    problems = upward_imports(root)
    assert len(problems) == 1 and problems[0].endswith("stages (layer 4) must not import pipelines (layer 5)")
    assert "garden.rerank.retrieve imports garden.pipelines.scoring" in problems[0]


@pytest.mark.parametrize("rel, statement, message", [
    # storage running the evaluation again, as the drill's verdicts once made it
    ("garden/store/backup.py", "from garden.evaluation.drill import case_verdicts",
     "store (layer 7) must not import evaluation (layer 8)"),
    # a format reading the saved story, which sits in the store above it
    ("garden/formats/stories.py", "from garden.store.stored import open_story",
     "formats (layer 6) must not import store (layer 7)"),
    # the derived files naming the stages' settings, as the trace log once did
    ("garden/derived/home.py", "from garden.rerank.stages import Settings",
     "derived files (layer 2) must not import stages (layer 4)"),
])
def test_an_upward_import_between_neighbouring_packages_is_caught(tmp_path, rel, statement, message):
    root = planted(tmp_path, {rel: f"\n{statement}  # noqa\n"})
    problems = upward_imports(root)
    assert len(problems) == 1 and problems[0].endswith(message), problems


def test_a_type_checking_import_runs_downhill_too(tmp_path):
    root = planted(tmp_path, {"garden/models.py":
                              "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from garden.formats.cases import Case  # noqa\n"})
    problems = upward_imports(root)
    assert len(problems) == 1 and problems[0].endswith(
        "data model and I/O primitives (layer 1) must not import formats (layer 6)")


def test_a_circle_closed_only_under_type_checking_is_a_cycle(tmp_path):
    """The rule on a tree of its own: b imports a at run time, a names b for annotations."""
    (tmp_path / "garden").mkdir()
    (tmp_path / "garden" / "__init__.py").write_text("")
    (tmp_path / "garden" / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                              "    from garden.b import B\n")
    (tmp_path / "garden" / "b.py").write_text("import garden.a\n\n\ndef f():\n    from . import a\n    return a\n")
    assert import_cycles(tmp_path) == [
        "import cycle: garden.a -> garden.b -> garden.a (garden/a.py:3 `from garden.b import B`; "
        "garden/b.py:1 `import garden.a`)"]
    assert import_cycles(tmp_path, type_only=False) == []


def test_the_old_circle_of_the_stages_is_caught(tmp_path):
    """The query context naming the resolved settings of the stage list for an annotation,
    as it once did: the stage list imports the context, so that closes a circle."""
    root = planted(tmp_path, {"garden/rerank/context.py":
                              "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from garden.rerank.stages import Resolved  # noqa\n"})
    cycles = import_cycles(root)
    assert len(cycles) == 1 and cycles[0].startswith(
        "import cycle: garden.rerank.context -> garden.rerank.stages -> garden.rerank.context "), cycles
    assert upward_imports(root) == []


def _last_line(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


@pytest.mark.parametrize("module, layer", [
    ("garden.models", "data model and I/O primitives"), ("garden.derived.home", "derived files"),
    ("garden.pipelines.indexes", "pipelines"), ("garden.pipelines.traces", "pipelines"),
    ("garden.store.stored", "store"), ("garden.evaluation.drill", "evaluation"), ("garden", "command line"),
    ("garden.cli", "command line"), ("garden.rerank.stages", "stages"), ("garden.report", "API, report and explorer"),
])
def test_a_module_takes_the_layer_of_the_longest_entry_covering_it(module, layer):
    assert LAYERS[layer_of(module)][0] == layer
