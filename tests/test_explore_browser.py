"""The explorer in a real browser: headless Chromium from the system's packages, driven by
Selenium, opens the page `garden explore` writes for the named-phrase case, steps through
it with the buttons and the keyboard, and asserts on the DOM. A JavaScript error in the
console fails the test; each step is saved as a screenshot under the test's temp folder.

The browser is the system's (tests/browser.py: `apt-get install -y chromium chromium-driver`;
`.ci/run` installs it when missing). Without it the test is skipped saying what to install,
and fails instead where the browser is required (CI=true, GARDEN_REQUIRE_BROWSER=1).
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from browser import start_chromium
from garden.cli import main

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo"


def served_packet():
    """The packet `default` itself serves for the named-phrase case: what the page must show."""
    from garden.formats.cases import load_case, spec_for
    from garden.formats.stories import load_story
    from garden.pipelines import make_pipeline

    q = load_case(ROOT / "regression" / "named-phrase.yaml").queries[0]
    return make_pipeline("default").run(spec_for(q, load_story(q.story_path))).packet


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = start_chromium(tmp_path_factory.mktemp("chromium-profile"), console=True)
    yield driver
    driver.quit()


def open_page(driver, path: Path, fragment: str = "") -> None:
    driver.get(path.as_uri() + fragment)
    deadline = time.monotonic() + 10
    while driver.execute_script("return document.body && document.body.getAttribute('data-ready')") != "1":
        if time.monotonic() > deadline:
            raise AssertionError(f"the page never got ready; console: {driver.get_log('browser')}")
        time.sleep(0.05)


def console_errors(driver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def current(driver) -> str:
    return driver.find_element("id", "panel").get_attribute("data-step")


def ids(driver, selector: str) -> list[str]:
    return [e.get_attribute("data-id") for e in driver.find_elements("css selector", selector)]


def no_network(driver) -> None:
    resources = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert resources == [], resources
    (nav,) = driver.execute_script("return performance.getEntriesByType('navigation').map(e => e.name)")
    assert nav.startswith("file://")
    csp = driver.find_element("css selector", 'meta[http-equiv="Content-Security-Policy"]').get_attribute("content")
    assert csp.startswith("default-src 'none'")


def test_the_named_phrase_case_step_by_step(browser, tmp_path, capsys):
    page = tmp_path / "named-phrase.html"
    assert main(["explore", "--case", str(ROOT / "regression" / "named-phrase.yaml"), "--baseline", "bm25s",
                 "--out", str(page)]) == 0
    capsys.readouterr()
    open_page(browser, page)
    no_network(browser)
    steps = [e.get_attribute("data-step") for e in browser.find_elements("css selector", "#steps li")]
    assert steps[:2] == ["triage", "baseline"] and steps[-1] == "packet"
    assert "phrase" in steps and "lanes" in steps and "pack" in steps and "controls" in steps

    seen = {}
    for n, step in enumerate(steps):
        assert current(browser) == step
        assert browser.current_url.endswith(f"#step-{step}")
        browser.save_screenshot(str(tmp_path / f"step-{n + 1:02d}-{step}.png"))
        seen[step] = {"ranking": ids(browser, "#ranking li"), "title": browser.find_element("id", "step-title").text}
        if step == "triage":
            assert "RETRIEVE" in browser.find_element("id", "step-body").text
        if step == "baseline":   # tokens alone: the chatty distractor leads
            assert seen[step]["ranking"][0] == "chat.campfire"
        if step == "phrase":     # contiguity: the anchor leads
            assert seen[step]["ranking"][0] == "log.week12"
            spans = browser.find_elements("css selector", "ul.spans li[data-credited='true']")
            assert "glacier custard incident" in [s.get_attribute("data-span") for s in spans]
        if step == "lanes":
            lane = browser.find_element("css selector", "ul.lanes li[data-lane='evidence']")
            assert lane.get_attribute("data-answers") == "true"
            assert "the store holds an answer" in browser.find_element("id", "step-body").text
        if step == "controls":
            controls = browser.find_elements("css selector", "li.control")
            first_rule = {}
            for c in controls:
                rules = [r.get_attribute("data-rule") for r in c.find_elements("css selector", "li.refusal")]
                if rules:
                    first_rule[c.get_attribute("data-name")] = rules[0]
                assert c.get_attribute("data-passed") == "true"
            assert len(set(first_rule.values())) >= 3, first_rule   # three controls, three different reasons
            assert "triage:skip" in first_rule.values()
        if step == "packet":     # the derived view behind its canonical record, and the budget used
            packet = ids(browser, "#packet li")
            assert packet.index("log.week12") < packet.index("view.jokes.index")
            budget = browser.find_element("id", "budget")
            served = served_packet()
            used = str(served.budget.used)
            assert (budget.get_attribute("data-used"), budget.get_attribute("data-limit")) == (used, "1200")
            assert ids(browser, "#budget .seg") == served.ids() == packet
            assert f"{used} of 1200 characters used" in budget.text
            assert browser.find_element("id", "case-verdict").get_attribute("data-passed") == "true"
        if n + 1 < len(steps):
            browser.find_element("id", "next").click()
    assert browser.find_element("id", "next").get_attribute("disabled") is not None

    # the keyboard, and a link that opens a step
    body = browser.find_element("tag name", "body")
    body.send_keys("\ue012")              # ArrowLeft
    assert current(browser) == steps[-2]
    body.send_keys("\ue011")              # Home
    assert current(browser) == "triage"
    body.send_keys("\ue014")              # ArrowRight
    assert current(browser) == "baseline"
    open_page(browser, page, "#step-phrase")
    assert current(browser) == "phrase" and ids(browser, "#ranking li")[0] == "log.week12"
    # a node on the graph opens its record
    browser.find_element("css selector", "svg .node[data-id='log.week12'] circle").click()
    assert "glacier custard incident" in browser.find_element("id", "detail").text
    assert list(tmp_path.glob("step-*.png")) and len(list(tmp_path.glob("step-*.png"))) == len(steps)
    assert console_errors(browser) == []


def test_a_console_error_is_caught(browser, tmp_path):
    """The console check is real: a page that throws is reported as SEVERE."""
    page = tmp_path / "throws.html"
    page.write_text("<!DOCTYPE html><body><script>document.body.setAttribute('data-ready','1');"
                    "null.boom();</script></body>", encoding="utf-8")
    open_page(browser, page)
    assert any("boom" in m for m in console_errors(browser))


@pytest.mark.skipif(not (LOCOMO / "conv-30.json").is_file(), reason=f"the LoCoMo data is not at {LOCOMO}")
def test_a_locomo_conversation_stays_responsive(browser, tmp_path, capsys):
    from garden.formats.locomo import import_locomo

    import_locomo(LOCOMO / "conv-30.json", tmp_path)
    page = tmp_path / "conv.html"
    assert main(["explore", str(tmp_path / "fixtures" / "locomo-30.yaml"), "When did Gina lose her job at Door Dash?",
                 "--out", str(page)]) == 0
    capsys.readouterr()
    open_page(browser, page)
    scene = json.loads(browser.execute_script("return document.getElementById('scene').textContent"))
    assert len(browser.find_elements("css selector", "svg .node")) == len(scene["nodes"]) <= 150
    assert re.search(r"Left out: \d+ records", browser.find_element("id", "drawn").text)
    started = time.monotonic()
    for _ in scene["steps"][1:]:
        browser.find_element("id", "next").click()
    per_step = (time.monotonic() - started) / max(1, len(scene["steps"]) - 1)
    assert current(browser) == "packet" and per_step < 0.5, per_step
    browser.save_screenshot(str(tmp_path / "locomo-packet.png"))
    assert console_errors(browser) == []
