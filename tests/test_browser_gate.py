"""Whether a browser test runs, skips or fails where no browser is installed (tests/browser.py):
skipped with one line naming what to install, unless the browser is required (CI=true, as
.ci/run runs, or GARDEN_REQUIRE_BROWSER=1), where its absence fails the test."""
from __future__ import annotations

import pytest

import browser


@pytest.fixture
def no_browser(tmp_path, monkeypatch):
    monkeypatch.setattr(browser, "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.setattr(browser, "CHROMEDRIVER", tmp_path / "no-chromedriver")
    for name in ("CI", "GARDEN_REQUIRE_BROWSER", "GARDEN_SKIP_BROWSER"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_without_a_browser_the_test_is_skipped_naming_what_to_install(no_browser):
    with pytest.raises(pytest.skip.Exception) as skipped:
        browser.start_chromium(no_browser / "profile")
    reason = str(skipped.value)
    assert "apt-get install -y chromium chromium-driver" in reason and "\n" not in reason
    assert str(no_browser / "no-chromium") in reason


@pytest.mark.parametrize("name, value", [("CI", "true"), ("GARDEN_REQUIRE_BROWSER", "1")])
def test_where_the_browser_is_required_its_absence_fails(no_browser, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(pytest.fail.Exception) as failed:
        browser.start_chromium(no_browser / "profile")
    assert "apt-get install -y chromium chromium-driver" in str(failed.value) and name in str(failed.value)


def test_a_skip_asked_for_wins_even_where_the_browser_is_required(no_browser, monkeypatch):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("GARDEN_SKIP_BROWSER", "1")
    with pytest.raises(pytest.skip.Exception, match="GARDEN_SKIP_BROWSER=1"):
        browser.start_chromium(no_browser / "profile")


def test_ci_other_than_true_does_not_require_it(no_browser, monkeypatch):
    monkeypatch.setenv("CI", "0")
    with pytest.raises(pytest.skip.Exception):
        browser.start_chromium(no_browser / "profile")
