"""Every command the README and the docs show is run: a renamed case, a changed flag or a
stale example fails the suite, not a reader.

A command is a line of a code block that starts with `garden ` (or `$ garden `), or an
inline code span that starts with `garden ` and names something to run (a span that is
usage syntax, `garden query STORY "TEXT"`, or only names a command, `garden compare`, is
not one; a span with a flag the parser does not know still fails). Every command is parsed
by the command line's own parser; every one is then run, in process, in page order, in a
scratch copy of the project (the shipped stories and cases, a garden home of its own), one
copy per page and a fresh one where a page says it starts from one (`cp -r fixtures ...`),
except the few listed in SKIPPED with why: each rule must still match a command, so the
list cannot go stale. A command a block shows followed by a `garden: ...` error line must
exit 1; every other must exit 0. The dates the docs show are never typed: a trace is named
by its folder, `.garden/traces`.

What a page says happens between two commands (a story edited, a control added to a case,
a shell line that writes a file) is done here as the page says it, and the answers a
person types to `garden judge` are given on its standard input.
"""
from __future__ import annotations

import io
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from garden.cli import _parser, main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "cli.md")]

# Commands not run here, each with why; every rule must match at least one command shown.
SKIPPED = {
    r"\.\./shared/data/": "reads a real collection (Vaswani, LoCoMo) from ../shared/data, minutes each; "
                          "tests/test_vaswani.py, test_locomo_compare.py and test_locomo_import.py run the "
                          "same code on it and hold the figures the docs quote",
    r"longmemeval_s(_cleaned)?\.json": "a released LongMemEval file, not in the project; "
                                      "tests/test_longmemeval_compare.py and test_longmemeval_import.py run the "
                                      "same commands on a fictional file in its format",
    r"^garden serve\b": "a server runs until it is stopped; tests/test_serve.py and test_serve_mcp.py start it as "
                        "a process and check what serve.md shows (the queries asked of it are asked here with "
                        "`garden query`, which writes the same trace line)",
    r"--pipeline milvus-|milvus-dense:uri=": "needs Milvus (a server for the uri); tests/test_milvus.py runs the "
                                             "Milvus retrievers embedded and against the server .ci/run starts",
    r"model=/tmp/models/": "needs the tiny models tests/tiny_models.py writes there; tests/test_own_models.py "
                           "writes them to a folder of its own and runs these commands from the pages",
    r"^garden ablate regression$": "27 cases under default and its eleven one-stage-removed variants, about "
                                   "15 s; `garden ablate regression/named-phrase.yaml --stages phrase` runs the "
                                   "same code here",
}

# What a person types to `garden judge` on each page (its verdicts and grades, in order)
ANSWERS = {
    "commands.md": "a\nl\nr\n\na\nn\nnote.battery=l\n",
    "traces.md": "a\nn\nn\nn\nnote.battery=l\na\nl\nn\n\n",
}

# Commands whose outcome depends on nothing a page did before them (and that leave nothing a
# later command reads but a trace no page reads after them): run once for all pages
ONCE = {"contrast", "check", "doctor", "pipelines", "ablate"}
SHELL = ("printf ", "sed ", "cat ")   # the shell lines a page shows doing what it says, run as shown
SYNTAX = re.compile(r"\[|\.\.\.|\|")                              # usage: [optional], A|B, more...
PLACEHOLDER = re.compile(r"(?:^|[-=,:/.])[A-Z][A-Z_]*(?:$|[-=,:/.])")  # what to type: N, scale-N, cases/NAME


def usage_syntax(code: str) -> bool:
    """Whether an inline span is usage syntax (`garden query STORY "TEXT" [--json]`), not a
    command to run: it has brackets, an alternative or an ellipsis, or a token (outside
    quotes) that is a placeholder in capitals."""
    if SYNTAX.search(code):
        return True
    try:
        tokens = shlex.split(code)
    except ValueError:
        return True
    return any(" " not in token and PLACEHOLDER.search(token) for token in tokens[1:])


@dataclass
class Shown:
    page: str
    line: int
    text: str                 # as shown, without the prompt
    in_block: bool
    must_fail: bool = False   # the block shows a `garden: ...` error after it
    fresh: tuple[str, ...] = ()   # a fresh project of these folders before it
    shell: bool = False
    served: bool = False      # a curl asked of the server the block started: asked of `garden query`

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.text, comments=True)[1:]

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def _fresh(prose: str) -> tuple[str, ...]:
    """A page that says it starts in a scratch copy (`cp -r fixtures ... /tmp/x/`)."""
    match = re.search(r"cp -r ((?:[a-z]+ )+)/tmp/", prose)
    return tuple(match.group(1).split()) if match else ()


def shown_commands(path: Path) -> list[Shown]:
    """The commands a page shows, in order."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    out: list[Shown] = []
    prose: list[tuple[int, str]] = []
    fence, block_start, since_block = None, 0, ""
    n = 0
    while n < len(lines):
        line = lines[n]
        opening = re.match(r"^\s*```(\w*)", line)
        if opening:
            if fence is None:
                fence, block_start = opening.group(1) or "plain", len(out)
                fresh = _fresh(since_block)
                since_block = ""
            else:
                fence = None
            n += 1
            continue
        if fence is None:
            prose.append((n + 1, line))
            since_block += line + "\n"
        elif fence not in ("text", "yaml", "json", "python"):
            body = line.strip()
            prompt = body.startswith("$ ")
            body = body[2:] if prompt else body
            while body.endswith("\\") and n + 1 < len(lines):
                n += 1
                body = body[:-1].rstrip() + " " + lines[n].strip()
            # `python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/garden contrast`
            parts = [part.strip().removeprefix(".venv/bin/") for part in body.split(" && ")]
            garden = [part for part in parts if part.startswith("garden ")]
            serving = any(s.in_block and s.text.startswith("garden serve") and s.text.endswith("&")
                          for s in out[block_start:])
            for part in garden:
                out.append(Shown(path.name, n + 1, part, True, fresh=fresh if len(out) == block_start else ()))
            if not garden and prompt and body.startswith(SHELL):
                out.append(Shown(path.name, n + 1, body, True, shell=True))
            elif not garden and prompt and body.startswith("curl ") and serving:
                out.append(Shown(path.name, n + 1, body, True, shell=True, served=True))
            elif not garden and out and len(out) > block_start and body.startswith("garden: ") and \
                    not body.startswith(("garden: warning", "garden: serving")):
                out[-1].must_fail = True
        n += 1
    joined = "\n".join(line for _, line in prose)
    starts = [0]
    for _, line in prose:
        starts.append(starts[-1] + len(line) + 1)
    for match in re.finditer(r"`(garden [^`]+)`", joined):
        code = " ".join(match.group(1).split())
        if usage_syntax(code):
            continue
        at = next(i for i, s in enumerate(starts) if s > match.start()) - 1
        out.append(Shown(path.name, prose[at][0], code, False))
    return sorted(out, key=lambda s: s.line)


def _parsed(shown: Shown) -> str | None:
    """None when the parser takes it; "mention" when only required arguments are missing
    (an inline span naming a command or a flag); else the parser's complaint."""
    complaint = io.StringIO()
    parser = _parser()   # built once: parsing leaves it as it was
    real = sys.stderr
    sys.stderr = complaint
    try:
        parser.parse_args(shown.argv)
    except SystemExit:
        message = complaint.getvalue()
        # an inline span naming a command, or a flag it takes (`garden query --pipeline`)
        named = "the following arguments are required" in message or (
            "expected one argument" in message and shown.argv[-1].startswith("--"))
        return "mention" if named and not shown.in_block else message.strip().splitlines()[-1]
    finally:
        sys.stderr = real
    if not shown.in_block and len(shown.argv) < 2:
        return "mention"   # `garden contrast` in a sentence names the command: the blocks run it
    return None


def skipped(shown: Shown) -> str | None:
    return next((why for rule, why in SKIPPED.items() if re.search(rule, shown.text)), None)


ALL = [shown for page in PAGES for shown in shown_commands(page)]


def test_the_docs_show_commands_and_every_one_parses():
    """Every command the pages show is one the parser takes: a renamed flag or choice fails
    here, whether the command is then run or skipped; and every skip rule still matches."""
    garden = [s for s in ALL if not s.shell]
    assert len(garden) > 60, "the extraction found too few commands"
    problems = [f"{s}: {why}" for s in garden if (why := _parsed(s)) not in (None, "mention")]
    assert not problems, "\n".join(problems)
    unused = [rule for rule in SKIPPED if not any(re.search(rule, s.text) for s in garden)]
    assert not unused, f"skip rules that match no command any more: {unused}"


def _query_of_curl(text: str) -> list[str]:
    """A `curl ... /query --json '{...}'` a page asks of the server it started, as `garden query`
    argv (the server writes the trace line that command writes; tests/test_serve.py holds it)."""
    import json

    body = json.loads(re.search(r"(?:-d|--json) '(\{.*\})'", text).group(1))
    return ["query", body["story"], body["text"]]


def _copy(into: Path, folders) -> None:
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    for name in folders:
        shutil.copytree(ROOT / name, into / name)


def _fix_battery_note(project: Path) -> None:
    """The fix traces.md makes to the story: the note gains an English title."""
    story = project / "fixtures" / "aurora-ridge.yaml"
    text = story.read_text(encoding="utf-8")
    anchor = "  - id: note.battery\n    kind: note\n"
    assert anchor in text
    story.write_text(text.replace(anchor, anchor + '    title: "Battery care: spare batteries kept warm '
                                  'in an inner pocket"\n'), encoding="utf-8")


def _add_controls(project: Path) -> None:
    """The control traces.md adds to the captured case, read from that page's yaml block."""
    page = (ROOT / "docs" / "traces.md").read_text(encoding="utf-8")
    [controls] = re.findall(r"```yaml\n(controls:\n.*?)```", page, re.S)
    with (project / "challenge" / "battery-care.yaml").open("a", encoding="utf-8") as f:
        f.write(controls)


# What a page says happens before a command (page, command, its occurrence on the page)
BETWEEN = {
    ("traces.md", "garden promote challenge/battery-care.yaml", 2): lambda p: (_fix_battery_note(p),
                                                                               _add_controls(p)),
    ("serve.md", "garden run challenge/battery-care.yaml", 1): _add_controls,
}


def test_every_command_the_docs_show_runs(tmp_path, monkeypatch, capsys):
    ran: dict[str, int] = {}
    took: dict[str, float] = {}
    once: set[str] = set()
    failures: list[str] = []
    for page in PAGES:
        commands = [s for s in ALL if s.page == page.name]
        if not any(not s.shell and _parsed(s) is None and not skipped(s) for s in commands):
            continue
        project = tmp_path / page.stem / "project"
        _copy(project, ("fixtures", "regression", "challenge"))
        monkeypatch.chdir(project)
        monkeypatch.setenv("GARDEN_HOME", str(project / ".garden"))
        seen: dict[str, int] = {}
        for shown in commands:
            if shown.fresh:
                project = tmp_path / page.stem / f"scene-{shown.line}"
                _copy(project, shown.fresh)
                monkeypatch.chdir(project)
                monkeypatch.setenv("GARDEN_HOME", str(project / ".garden"))
            seen[shown.text] = seen.get(shown.text, 0) + 1
            step = BETWEEN.get((page.name, shown.text, seen[shown.text]))
            if step is not None:
                step(project)
            if shown.served:
                assert main(_query_of_curl(shown.text)) == 0, shown
            elif shown.shell:
                subprocess.run(["bash", "-c", shown.text], cwd=project, check=True, capture_output=True)
            if shown.shell:
                capsys.readouterr()
                continue
            if _parsed(shown) is not None or skipped(shown):
                continue
            name = shown.argv[0]
            if name in ONCE and not shown.must_fail and shown.text in once:
                continue
            once.add(shown.text)
            monkeypatch.setattr("sys.stdin", io.StringIO(ANSWERS.get(page.name, "") if name == "judge" else ""))
            started = time.perf_counter()
            code = main(shown.argv)
            took[str(shown)] = time.perf_counter() - started
            out, err = capsys.readouterr()
            expected = 1 if shown.must_fail else 0
            ran[page.name] = ran.get(page.name, 0) + 1
            if code != expected:
                failures.append(f"{shown}: exit {code}, the page shows {expected}\n{err.strip()[-600:]}")
    slowest = sorted(took.items(), key=lambda kv: -kv[1])[:8]
    print("slowest: " + "; ".join(f"{name} {seconds:.1f} s" for name, seconds in slowest))
    assert not failures, "\n".join(failures)
    assert sum(ran.values()) > 40, ran
