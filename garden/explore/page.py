"""The explorer's page: the template, its style and script read as package data and inlined,
with the scene as one readable JSON block. No network, no build step, no framework."""
from __future__ import annotations

import html
import json
import re
from importlib import resources

CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"


def _asset(name: str) -> str:
    return resources.files("garden.explore").joinpath(name).read_text(encoding="utf-8")


def scene_json(scene: dict) -> str:
    """The scene as JSON that can sit inside a <script> element: `<`, `>` and `&` escaped,
    so no record text can close the element or open a comment."""
    text = json.dumps(scene, ensure_ascii=False, indent=1, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render(scene: dict) -> str:
    page = _asset("page.html")
    title = f"{scene['title']}: {scene['query']}"
    parts = {
        "{{CSP}}": CSP,
        "{{TITLE}}": html.escape(title),
        "/*{{STYLE}}*/": _asset("page.css"),
        "/*{{SCRIPT}}*/": _asset("page.js"),
        "{{SCENE}}": scene_json(scene),
    }
    # one pass over the template: a value that happens to hold a placeholder stays as it is
    pattern = re.compile("|".join(re.escape(k) for k in parts))
    return pattern.sub(lambda m: parts[m.group(0)], page)
