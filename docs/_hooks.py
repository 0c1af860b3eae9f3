"""MkDocs hooks: the site's front page is the README (its links to `docs/` made links
between pages), the command reference is the parser's own help, generated at build
time, so a flag added to the command line is in the docs without an edit here, the
store page's list of durable folders is the one `garden/formats/layout.py` defines, the
list backup, restore and the doctor read, and the pipeline page's diagram is the stage
list's own (`garden.rerank.stages.diagram`), so a stage added to the list is drawn there."""
from __future__ import annotations

import argparse
from pathlib import Path

MARKER = "<!-- garden-cli-reference -->"
README_MARKER = "<!-- garden-readme -->"
DURABLE_MARKER = "<!-- garden-durable -->"
DIAGRAM_MARKER = "<!-- garden-pipeline-diagram -->"
ROOT = Path(__file__).resolve().parents[1]


def front_page() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.replace("](docs/", "](")


def _help_of(parser: argparse.ArgumentParser) -> str:
    # a fixed width: the page is the same on every machine and terminal
    formatter = parser.formatter_class
    parser.formatter_class = lambda prog: formatter(prog, width=88)
    try:
        return parser.format_help()
    finally:
        parser.formatter_class = formatter


def cli_reference() -> str:
    from garden.cli import build_parser, subcommands

    parser = build_parser()
    sections = ["## garden\n\n```text\n" + _help_of(parser) + "```\n"]
    for name, command in subcommands(parser).items():
        sections.append(f"## garden {name}\n\n```text\n{_help_of(command)}```\n")
        for child_name, child in subcommands(command).items():
            sections.append(f"### garden {name} {child_name}\n\n```text\n{_help_of(child)}```\n")
    return "\n".join(sections)


def durable_list() -> str:
    from garden.formats.layout import DURABLE

    return "\n".join(f"- `{name}/`: {what}" for name, what in DURABLE.items()) + "\n"


def pipeline_diagram() -> str:
    from garden.rerank.stages import diagram

    return "```\n" + diagram() + "```\n"


def on_page_markdown(markdown: str, page, config, files) -> str:
    if README_MARKER in markdown:
        markdown = markdown.replace(README_MARKER, front_page())
    if DURABLE_MARKER in markdown:
        markdown = markdown.replace(DURABLE_MARKER, durable_list())
    if DIAGRAM_MARKER in markdown:
        markdown = markdown.replace(DIAGRAM_MARKER, pipeline_diagram())
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, cli_reference())
    return markdown
