"""The system's headless Chromium, driven by Selenium, for the suite's browser tests.

The browser is Debian's (`apt-get install -y chromium chromium-driver`), never one a test
tool downloads. Without it a browser test is skipped, its reason naming what to install,
so the README's second command passes on a machine that has none and on one whose user
cannot install it. Where the browser is required, its absence fails the test instead:
under `CI=true` (as `.ci/run` runs, after installing it) or `GARDEN_REQUIRE_BROWSER=1`.
`GARDEN_SKIP_BROWSER=1` skips the browser tests even where a browser is installed.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
INSTALL = "apt-get install -y chromium chromium-driver"

FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--window-size=1400,900"]


def browser_required() -> bool:
    """Whether a missing browser fails the test rather than skipping it."""
    return os.environ.get("CI", "").lower() == "true" or os.environ.get("GARDEN_REQUIRE_BROWSER") == "1"


def missing_browser() -> str | None:
    """Why the browser tests cannot run here (one line naming what to install), or None."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.is_file()]
    if missing:
        return f"no system browser ({', '.join(missing)} missing): install it with `{INSTALL}`"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed: pip install -e '.[test]'"
    return None


def start_chromium(profile: Path, extra_flags: tuple[str, ...] = (), console: bool = False):
    """A headless Chromium session with a fresh profile in `profile`, or the test skipped
    (or failed, where the browser is required) saying what is missing."""
    if os.environ.get("GARDEN_SKIP_BROWSER") == "1":
        pytest.skip("GARDEN_SKIP_BROWSER=1: the browser tests are skipped on this machine")
    reason = missing_browser()
    if reason:
        if browser_required():
            pytest.fail(f"{reason} (required here: CI=true or GARDEN_REQUIRE_BROWSER=1)")
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "1"  # Selenium Manager never looks for a driver to download
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, *extra_flags):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    if console:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
