"""The HTML report in a real browser: headless Chromium (Debian's ``chromium``, installed by ``make test``
when missing) loads the page without console errors or network requests, the table has one row per
layer, clicking a heading sorts it, and a screenshot is written to ``test-artifacts/``."""

from __future__ import annotations

import base64
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from cdp import Browser
from typer.testing import CliRunner

from tileplan import api

ARTIFACTS = Path(os.environ.get("TILEPLAN_ARTIFACTS", Path(__file__).resolve().parent.parent / "test-artifacts"))


def chromium() -> str:
    for name in (os.environ.get("TILEPLAN_CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome"):
        if name and (path := shutil.which(name)):
            return path
    pytest.skip("no Chromium: `make test` installs Debian's chromium with apt-get when it can; this machine "
                "could not (not root, or no package registry), so the browser test of the HTML report is skipped")


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Any:
    exe = chromium()
    folder = tmp_path_factory.mktemp("report")
    path = folder / "lenet5.html"
    from tileplan.cli import app

    result = CliRunner().invoke(app, ["report", "lenet5", "--arch", "eyeriss", "-j", "1", "-o", str(path),
                                      "--set", "dram.bandwidth_bytes_per_s=4e9"])
    assert result.exit_code == 0, result.output
    with Browser(exe) as browser:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for method in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"):
            browser.send(method, session=session)
        browser.send("Emulation.setDeviceMetricsOverride",
                     {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False}, session=session)
        browser.send("Page.navigate", {"url": path.as_uri()}, session=session)
        browser.wait_event("Page.loadEventFired")
        yield browser, session, path


def js(page: Any, expression: str) -> Any:
    browser, session, _ = page
    reply = browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=session)
    assert "exceptionDetails" not in reply, reply
    return reply["result"].get("value")


def click(page: Any, selector: str) -> None:
    """A real mouse click (pressed and released) at the middle of the element."""
    browser, session, _ = page
    box = js(page, f"(function(){{var el=document.querySelector({json.dumps(selector)}); el.scrollIntoView();"
                   f"var r=el.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2];}})()")
    for kind in ("mousePressed", "mouseReleased"):
        browser.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                                  "clickCount": 1}, session=session)


def column(page: Any, index: int, attr: str = "data-value") -> list[Any]:
    return js(page, f"Array.prototype.map.call(document.querySelectorAll('#layers tbody tr'), function(r){{"
                    f"return r.cells[{index}].getAttribute('{attr}');}})")


def test_page_loads_clean_and_offline(page: Any) -> None:
    browser, session, path = page
    js(page, "1")  # flush events
    errors = [ev for ev in browser.events
              if ev.get("method") == "Runtime.exceptionThrown"
              or (ev.get("method") == "Runtime.consoleAPICalled" and ev["params"]["type"] in ("error", "assert"))
              or (ev.get("method") == "Log.entryAdded" and ev["params"]["entry"]["level"] == "error")]
    assert errors == []
    requests = [ev["params"]["request"]["url"] for ev in browser.events
                if ev.get("method") == "Network.requestWillBeSent"]
    assert requests == [path.as_uri()]  # the page itself, nothing else
    assert js(page, "document.title") == "tileplan: lenet5 on eyeriss"
    # every figure is inline SVG and drawn with a size
    sizes = js(page, "Array.prototype.map.call(document.querySelectorAll('svg.figure'), function(s){"
                     "var r=s.getBoundingClientRect(); return [r.width, r.height];})")
    assert len(sizes) == 4 and all(w > 300 and h > 100 for w, h in sizes)
    assert "4e9" in js(page, "document.getElementById('machine').textContent")


def test_table_has_one_row_per_layer_and_sorts(page: Any) -> None:
    plan = api.plan("lenet5", api.load_arch("eyeriss", ["dram.bandwidth_bytes_per_s=4e9"]), jobs=1)
    names = [lp.name for lp in plan.layers]
    layers = js(page, "Array.prototype.map.call(document.querySelectorAll('#layers tbody tr'),"
                      "function(r){return r.getAttribute('data-layer');})")
    assert layers == names
    cycles = [lp.cost.latency_cycles for lp in plan.layers]
    assert [float(v) for v in column(page, 11)] == cycles
    click(page, "#layers thead th:nth-child(12)")  # "cycles"
    assert js(page, "document.querySelector('#layers thead th:nth-child(12)').getAttribute('aria-sort')") \
        == "ascending"
    assert [float(v) for v in column(page, 11)] == sorted(cycles)
    click(page, "#layers thead th:nth-child(12)")
    assert [float(v) for v in column(page, 11)] == sorted(cycles, reverse=True)
    click(page, "#layers thead th:nth-child(2)")  # "layer", as text
    assert js(page, "Array.prototype.map.call(document.querySelectorAll('#layers tbody tr'),"
                    "function(r){return r.getAttribute('data-layer');})") == sorted(names)
    click(page, "#layers thead th:nth-child(1)")  # back to network order
    assert js(page, "Array.prototype.map.call(document.querySelectorAll('#layers tbody tr'),"
                    "function(r){return r.getAttribute('data-layer');})") == names


def test_screenshot_is_written(page: Any) -> None:
    browser, session, _ = page
    js(page, "window.scrollTo(0, 0)")
    size = browser.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
    data = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip},
                        session=session)["data"]
    png = base64.b64decode(data)
    assert png.startswith(b"\x89PNG") and len(png) > 20_000  # a blank page is a few KB
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    # Written beside and renamed, so runs side by side (pytest -n, two checkouts) never see half a file.
    part = ARTIFACTS / f"report-lenet5.png.{os.getpid()}"
    part.write_bytes(png)
    part.replace(ARTIFACTS / "report-lenet5.png")
