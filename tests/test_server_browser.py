"""The page in a real browser: `specdecode serve --target toy` in a subprocess, driven through Debian's chromium.

Every test fails on any console error or uncaught page error. Screenshots of each figure go to test-artifacts/.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from specdecode.analysis import best_gamma

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


@dataclass
class Server:
    url: str
    process: subprocess.Popen
    log: Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(log: Path, *extra: str) -> Server:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "specdecode", "serve", "--target", "toy", "--port",
                                    str(port), *extra], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"specdecode serve exited with status {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if json.load(response)["status"] == "ok":
                    return Server(url, process, log)
        except OSError:
            time.sleep(0.2)
    process.kill()
    pytest.fail(f"specdecode serve did not answer /health within 120 s:\n{log.read_text()}")


def stop_server(server: Server, timeout: float = 30) -> int:
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGINT)
        try:
            server.process.wait(timeout)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()
            pytest.fail(f"specdecode serve ignored Ctrl-C for {timeout} s:\n{server.log.read_text()}")
    return server.process.returncode


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = start_server(tmp_path_factory.mktemp("serve") / "server.log")
    yield server
    stop_server(server)


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"the browser tests need Debian's chromium at {CHROMIUM}: run `apt-get install -y chromium` "
                    "(bin/bootstrap dev does it where apt-get is available)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@dataclass
class Page:
    """A playwright page that records console errors and uncaught page errors."""

    page: object
    problems: list[str] = field(default_factory=list)

    def check(self) -> None:
        assert not self.problems, "the page reported errors:\n" + "\n".join(self.problems)


def rewritten(change):
    """A route handler answering with the server's JSON as `change` rewrites it."""
    def handle(route):
        route.fulfill(response=(response := route.fetch()), json=change(response.json()))
    return handle


@pytest.fixture
def open_page(browser, server):
    contexts = []

    def open_(width: int = 1280, height: int = 900, answers: dict | None = None) -> Page:
        """The page in a fresh context; `answers`: {URL pattern: change} rewrites those answers of the server."""
        context = browser.new_context(viewport={"width": width, "height": height})
        contexts.append(context)
        for pattern, change in (answers or {}).items():
            context.route(pattern, rewritten(change))
        page = context.new_page()
        result = Page(page)
        page.on("console", lambda m: result.problems.append(f"console {m.type}: {m.text}")
                if m.type in ("error", "assert") else None)
        page.on("pageerror", lambda e: result.problems.append(f"page error: {e}"))
        page.goto(server.url + "/")
        page.wait_for_function("document.getElementById('gamma-best').dataset.key !== undefined")
        page.wait_for_function("document.getElementById('draws-chart').dataset.seed !== undefined")
        page.wait_for_function("document.getElementById('live-prompt').value !== ''")
        return result

    yield open_
    for context in contexts:
        context.close()


def screenshot(page, selector: str, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(selector).screenshot(path=str(ARTIFACTS / name))


def set_slider(page, selector: str, value: float) -> None:
    page.eval_on_selector(
        selector,
        "(el, v) => { el.value = v; el.dispatchEvent(new Event('input', {bubbles: true})); }",
        str(value),
    )


def rgb(css: str) -> tuple[int, int, int]:
    r, g, b = (int(x) for x in re.findall(r"\d+", css)[:3])
    return r, g, b


def check_colours(styles: list[dict]) -> set[str]:
    """Accepted green, rejected struck through in orange, the target's token (corrected or bonus) blue."""
    seen = set()
    for s in styles:
        r, g, b = rgb(s["color"])
        kind = s["kind"]
        seen.add(kind)
        if kind == "accepted":
            assert g > r + 40 and g > b + 40, s
            assert "line-through" not in s["decoration"], s
        elif kind == "rejected":
            assert r > g + 60 > b + 60 and r > 180, s
            assert "line-through" in s["decoration"], s
        elif kind in ("corrected", "bonus"):
            assert b > r + 60 and b > g + 60, s
            assert "line-through" not in s["decoration"], s
        else:
            raise AssertionError(f"unexpected kind {kind!r}")
    return seen


STYLES = """sel => [...document.querySelectorAll(sel)].map(el => ({
    kind: ['accepted', 'rejected', 'corrected', 'bonus'].find(k => el.classList.contains(k)),
    color: getComputedStyle(el).color, decoration: getComputedStyle(el).textDecorationLine}))"""


def test_run_one_round_counts_and_colours(open_page):
    p = open_page()
    page = p.page
    assert check_colours(page.evaluate(STYLES, "#round .legend .tok")) == {"accepted", "rejected", "corrected"}
    set_slider(page, "#round-gamma", 6)
    assert page.inner_text("#round-gamma-value") == "6"
    seen, clicks = set(), 0
    while clicks < 5 or not {"accepted", "rejected", "corrected"} <= seen:
        assert clicks < 40, f"40 rounds and still not every colour: {seen}"
        page.click("#round-run")
        clicks += 1
        page.wait_for_function(f"document.getElementById('round-counter').dataset.runs === '{clicks}'")
        styles = page.evaluate(STYLES, "#round-line .tok")
        kinds = [s["kind"] for s in styles]
        assert kinds[-1] in ("corrected", "bonus") and 1 <= len(kinds) <= 7
        assert kinds.count("rejected") == (kinds[-1] == "corrected")
        seen |= check_colours(styles)
    counter = page.inner_text("#round-counter")
    produced = int(page.get_attribute("#round-counter", "data-produced"))
    assert counter.startswith(f"big-model runs: {clicks}, tokens produced: {produced}")
    words = page.inner_text("#round-text").split()
    assert words[0] == "the" and len(words) == 1 + produced and clicks <= produced <= 7 * clicks
    assert "drafts accepted" in page.inner_text("#round-summary")
    screenshot(page, "#round", "round.png")
    page.click("#round-reset")
    assert page.inner_text("#round-counter") == "big-model runs: 0, tokens produced: 0"
    assert page.inner_text("#round-text") == "the"
    p.check()


def test_gamma_sliders_name_the_best_gamma(open_page):
    p = open_page()
    page = p.page
    for alpha, c in [(0.4, 0.05), (0.9, 0.0), (0.37, 0.21), (0.99, 0.01), (1.0, 0.0), (0.0, 1.0), (0.9, 0.01),
                     (0.8, 0.05)]:  # the last one, the paper's example, is the screenshot
        set_slider(page, "#gamma-alpha", alpha)
        set_slider(page, "#gamma-c", c)
        key = page.evaluate("() => `${Number(document.getElementById('gamma-alpha').value)}|"
                            "${Number(document.getElementById('gamma-c').value)}`")
        assert key == f"{alpha:g}|{c:g}"
        page.wait_for_function(f"document.getElementById('gamma-best').dataset.key === '{key}'")
        assert int(page.inner_text("#gamma-best")) == best_gamma(alpha, c, max_gamma=20), (alpha, c)
        assert page.inner_text("#gamma-alpha-value") == f"{alpha:.2f}"
        lines = page.evaluate("[...document.querySelectorAll('#gamma-chart polyline')]"
                              ".map(l => l.getAttribute('points').trim().split(' ').length)")
        assert lines == [20, 20]
    screenshot(page, "#gamma", "gamma.png")
    p.check()


def test_ten_thousand_draws_match_p(open_page):
    p = open_page()
    page = p.page
    first = page.get_attribute("#draws-chart", "data-seed")
    page.click("#draws-run")
    page.wait_for_function(f"document.getElementById('draws-chart').dataset.seed !== '{first}'")
    bars = page.evaluate("[...document.querySelectorAll('#draws-chart [data-series=produced]')]"
                         ".map(b => ({word: b.dataset.word, f: +b.dataset.value, p: +b.dataset.p}))")
    assert [b["word"] for b in bars] == ["cat", "dog", "fish"]
    assert [b["p"] for b in bars] == [0.5, 0.3, 0.2]
    assert sum(b["f"] for b in bars) == pytest.approx(1)
    for b in bars:
        se = (b["p"] * (1 - b["p"]) / 10_000) ** 0.5
        assert abs(b["f"] - b["p"]) <= 4 * se, b
    targets = page.evaluate("[...document.querySelectorAll('#draws-chart [data-series=target]')].length")
    assert targets == 3 and "drafts accepted" in page.inner_text("#draws-info")
    screenshot(page, "#draws", "draws.png")
    p.check()


def test_live_mode_streams_rounds_and_stats(open_page):
    p = open_page()
    page = p.page
    assert "target toy" in page.inner_text("#live-models")
    page.fill("#live-prompt", "the cat")
    page.fill("#live-max", "40")
    page.fill("#live-temperature", "1")
    page.click("#live-run")
    page.wait_for_selector("#live-stats[data-done=true]", timeout=30_000)
    rounds = page.locator("#live-output .round").count()
    calls = int(page.inner_text("#live-calls"))
    assert rounds == calls >= 1
    words = page.evaluate("[...document.querySelectorAll('#live-output .tok:not(.rejected)')]"
                          ".map(t => t.textContent.trim())")
    assert len(words) == 40 and set(words) <= {"the", "cat", "dog", "fish", "sat", "ran", "on", "mat"}
    check_colours(page.evaluate(STYLES, "#live-output .tok"))
    alpha = float(page.inner_text("#live-alpha"))
    assert 0 <= alpha <= 1 and float(page.inner_text("#live-tpc")) >= 1 and float(page.inner_text("#live-tps")) > 0
    c = float(page.inner_text("#live-c"))
    screenshot(page, "#live", "live.png")
    page.click("#live-use")
    slider_alpha = float(page.input_value("#gamma-alpha"))
    assert slider_alpha == pytest.approx(alpha, abs=1e-9)  # both are the measured alpha to 2 decimals
    slider_c = float(page.input_value("#gamma-c"))
    assert slider_c == pytest.approx(min(c, 1.0), abs=0.006)
    page.wait_for_function(f"document.getElementById('gamma-best').dataset.key === '{slider_alpha:g}|{slider_c:g}'")
    assert int(page.inner_text("#gamma-best")) == best_gamma(slider_alpha, slider_c, max_gamma=20)
    p.check()


def test_phone_width_has_no_horizontal_overflow(open_page):
    p = open_page(390, 844)
    page = p.page
    page.click("#round-run")
    page.wait_for_function("document.getElementById('round-counter').dataset.runs === '1'")
    page.fill("#live-max", "60")
    page.click("#live-run")
    page.wait_for_selector("#live-stats[data-done=true]", timeout=30_000)
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"the page is {width[0]} px wide in a {width[1]} px viewport"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "phone.png"), full_page=True)
    p.check()


def other_facts(facts: dict) -> dict:
    """What a server with other words, legend, defaults and limits would answer at /api/page."""
    facts["kinds"] = {kind: f"{kind} (as this server says it)" for kind in facts["kinds"]}
    facts["legend"] = [{"kind": "accepted", "text": "kept"}, {"kind": "rejected", "text": "thrown out"},
                       {"kind": "bonus", "text": "the big model's own"}]
    facts["toy"] |= {"words": ["the", "cat", "sat"], "start": {"tokens": [1], "text": "cat"},
                     "gamma": {"default": 3, "minimum": 2, "maximum": 6}, "agreement_at_least": 0.9}
    facts["draws"]["n"] = 2000
    facts["live"] |= {"prompt": "the dog", "words": ["the", "dog"], "max_tokens": {"default": 12, "minimum": 2},
                      "gamma": {"minimum": 2, "maximum": 9}, "temperature": {"default": 0.5, "minimum": 0}}
    return facts


def other_example(draws: dict) -> dict:
    """/api/draws with the worked example's words renamed."""
    return draws | {"words": ["ant", "bee", "cow"]}


def other_costs(gamma: dict) -> dict:
    """/api/gamma?verify=measured with T(k) measured at other pass sizes than COST_KS."""
    return gamma | ({"verify_ms": {"1": 1.0, "3": 2.5, "6": 4.0}} if "verify_ms" in gamma else {})


def test_the_page_shows_what_the_server_says(open_page, server):
    """Every fact the page shows beside a figure comes from the server: served otherwise, the page shows otherwise.
    Each mismatch is listed, so a page that keeps its own copy of a fact names it."""
    p = open_page(answers={"**/api/page": other_facts, "**/api/draws?*": other_example, "**/api/gamma?*": other_costs})
    page = p.page
    with urllib.request.urlopen(f"{server.url}/health", timeout=10) as response:
        served_max_tokens = json.load(response)["max_tokens"]
    asked = []
    page.on("request", lambda r: asked.append(json.loads(r.post_data)) if r.url.endswith("/api/toy/round") else None)

    def text(selector: str) -> str:
        texts = page.locator(selector).all_inner_texts()
        return " | ".join(texts) if texts else f"(no {selector} on the page)"

    def shown_in(selector: str, js: str) -> str:
        return " | ".join(page.eval_on_selector_all(selector, f"nodes => nodes.map({js})"))

    def limits(selector: str) -> str:
        return page.eval_on_selector(selector, "el => `min ${el.min} max ${el.max} value ${el.value}`")

    shown = {
        "legend": shown_in("#round .legend .tok, #live .legend .tok", "t => `${t.classList[1]}: ${t.textContent}`"),
        "start": text("#round-text"),
        "toy gamma": f"{limits('#round-gamma')}, shown {text('#round-gamma-value')}",
        "toy words": text("#round .reading"),
        "toy agreement": text("#round .reading"),
        "draws n": " | ".join([text("nav a[href='#draws']"), text("#draws-title"), text("#draws .reading")]),
        "worked example": text("#draws-example"),
        "draws chart": shown_in("#draws-chart [data-series=target]", "b => b.dataset.word"),
        "live prompt": f"{page.input_value('#live-prompt')} | {page.get_attribute('#live-prompt', 'placeholder')}",
        "live max tokens": limits("#live-max"),
        "live gamma": limits("#live-gamma"),
        "live temperature": limits("#live-temperature"),
    }

    expected = {
        "legend": "accepted: kept | rejected: thrown out | bonus: the big model's own | accepted: kept",
        "start": "cat",
        "toy gamma": "min 2 max 6 value 3, shown 3",
        "toy words": "a vocabulary of 3 words",
        "toy agreement": "about 90 to 100%",
        "draws n": "2,000 draws | 2,000 draws | Reading it: this runs the rule 2,000 times",
        "worked example": "“ant” is kept with probability 0.5 / 0.6 = 0.833; “bee” and “cow” are always kept",
        "draws chart": "ant | bee | cow",
        "live prompt": "the dog | words of: the dog",
        "live max tokens": f"min 2 max {served_max_tokens} value 12",  # the max: the served limit, from /health
        "live gamma": "min 2 max 9",
        "live temperature": "min 0 max 5 value 0.5",  # the max: the page's own slider range
    }
    wrong = {name: value for name, value in shown.items() if expected[name] not in value}
    if "of 2,000 drafts" not in text("#draws-info"):
        wrong["draws asked"] = text("#draws-info")
    page.click("#round-run")
    page.wait_for_function("document.getElementById('round-counter').dataset.runs === '1'")
    if (asked[0]["tokens"], asked[0]["gamma"]) != ([1], 3):
        wrong["first round asked"] = asked[0]
    if not (title := page.get_attribute("#round-line .tok", "title")).endswith("(as this server says it)"):
        wrong["tooltip"] = title
    page.check("#gamma-measured")
    page.wait_for_function("document.getElementById('gamma-measured-detail').textContent !== ''"
                           " || !document.getElementById('gamma-error').hidden")
    detail = text("#gamma-measured-detail") or text("#gamma-error")
    if "(T(1) = 1.0 ms, T(3) = 2.5 ms, T(6) = 4.0 ms)" not in detail:
        wrong["measured T(k)"] = detail
    assert not wrong, "the page does not show what the server says:\n" + "\n".join(
        f"  {name}: {value!r}" for name, value in wrong.items())
    p.check()


def test_a_client_that_disconnects_stops_its_generation(server):
    """1024 rounds asked for (gamma 1, 2048 tokens); the client reads one event and hangs up."""
    connection = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]), timeout=30)
    body = {"prompt": "the cat", "max_tokens": 2048, "gamma": 1, "stream": True}
    connection.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 200 and response.fp.readline()
    connection.sock.close()
    connection.close()
    deadline = time.monotonic() + 20
    while "client went away" not in server.log.read_text():
        assert time.monotonic() < deadline, f"the generation did not stop:\n{server.log.read_text()[-2000:]}"
        time.sleep(0.1)
    stopped = re.search(r"generation stopped after (\d+) rounds", server.log.read_text())
    assert stopped and int(stopped.group(1)) < 1024
    with urllib.request.urlopen(f"{server.url}/v1/models", timeout=10) as again:  # still serving
        assert again.status == 200


def test_ctrl_c_stops_the_server_cleanly(tmp_path):
    server = start_server(tmp_path / "server.log")
    with urllib.request.urlopen(f"{server.url}/v1/models", timeout=10) as response:
        assert json.load(response)["data"][0]["id"] == "toy"
    assert stop_server(server) == 0
    log = server.log.read_text()
    assert '"GET /v1/models HTTP/1.1" 200' in log  # requests are logged
    assert "specdecode serve: stopped" in log and "Traceback" not in log

