"""The status page in a real headless browser (Debian's chromium, driven by playwright)."""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ProxyFactory
from tests.helpers.agent import RECORDED, TOOLS, agent_step, client, follow, start_messages
from tests.helpers.servers import FakeUpstream, tool_call

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None and not os.environ.get("REPLAY_PROXY_REQUIRE_BROWSER"):
    pytest.skip(
        "chromium is not installed (apt-get install chromium; .ci/run does)",
        allow_module_level=True,
    )

playwright = pytest.importorskip("playwright.sync_api")
Image = pytest.importorskip("PIL.Image")

GREEN = (0x2E, 0x7D, 0x32)  # the progress fill and the scripted chips
RED = (0xC6, 0x28, 0x28)  # a divergence chip


def pixels_of(png: bytes, color: tuple[int, int, int]) -> int:
    image = Image.open(io.BytesIO(png)).convert("RGB")
    return sum(
        1
        for pixel in image.get_flattened_data()
        if all(abs(a - b) <= 6 for a, b in zip(pixel, color, strict=True))
    )


def test_the_status_page_renders_sessions_and_refreshes_itself(
    proxy: ProxyFactory, write_trajectory: Callable[..., Path], tmp_path: Path
) -> None:
    assert CHROMIUM is not None
    with proxy(trajectory=[write_trajectory(RECORDED)], admin_token="browser-token-Pz3Wq7") as url:
        root = url.removesuffix("/v1")
        good = client(url, **{"x-session-affinity": "agent-ok"})
        messages = start_messages()
        first, _ = agent_step(good, messages, stream=True)
        follow(messages, first)
        bad = client(url, **{"x-session-affinity": "agent-bad"})
        wrong = [
            *start_messages(),
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "x", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
                ],
            },
        ]
        with pytest.raises(Exception, match="does not follow the script"):
            bad.chat.completions.create(
                model="m",
                messages=wrong,
                tools=[{"type": "function", "function": {"name": "bash", "parameters": {}}}],
            )

        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM,
                args=[
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--no-first-run",
                ],
            )
            try:
                page = browser.new_page(viewport={"width": 1200, "height": 600})
                page.goto(root)  # the bare address leads to the status page, which asks
                page.fill("input[name=token]", "browser-token-Pz3Wq7")
                page.click("button")  # sets the cookie, drops the token from the address
                page.wait_for_selector("tr.session")
                assert page.url == f"{root}/replay/ui"
                rows = page.locator("tr.session")
                assert rows.count() == 2
                assert page.locator('tr.session[data-phase="diverged"]').count() == 1
                assert (
                    "1/2 turns" in page.locator('tr.session[data-phase="replaying"]').inner_text()
                )

                agent_step(good, messages, stream=False)  # turn 2: the page must show it by itself
                page.wait_for_function(
                    "document.body.innerText.includes('2/2 turns')", timeout=20_000
                )

                shot = page.locator("#sessions").screenshot()
                (tmp_path / "status.png").write_bytes(shot)  # kept with the test's files
                assert pixels_of(shot, GREEN) > 500  # a full progress bar, and scripted chips
                assert pixels_of(shot, RED) > 50  # the divergence chip
            finally:
                browser.close()


AMBER = (0xFF, 0xD5, 0x4F)  # the stretch that differs, in a drawn divergence


def test_a_divergence_is_drawn_side_by_side_in_a_long_conversation(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], tmp_path: Path
) -> None:
    """200 messages, one date differs in message 151: the page shows that message only, both
    sides, the differing stretch marked, with its path, verdict and mask."""
    assert CHROMIUM is not None
    fake, upstream_url = upstream
    fake.then(tool_call("bash", '{"command": "ls"}', "call_1"))
    chat: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
    for k in range(99):
        chat.append({"role": "user", "content": f"Question {k}: what changed on 2026-12-05?"})
        chat.append({"role": "assistant", "content": f"Answer {k}: nothing much."})
    chat.append({"role": "user", "content": "Now list the files."})
    assert len(chat) == 200

    def ask(url: str, messages: list[dict[str, Any]]) -> None:
        c = client(url, **{"x-session-affinity": "long"})
        c.chat.completions.create(model="m", messages=messages, tools=TOOLS)

    with proxy(upstream=upstream_url, record_dir=tmp_path / "rec") as url:
        ask(url, chat)
    later = [dict(m) for m in chat]
    later[151]["content"] = later[151]["content"].replace("2026-12-05", "2027-01-14")
    with proxy(trajectory=[tmp_path / "rec" / "long.jsonl"], mode="strict") as url:
        with pytest.raises(Exception, match="is not the recorded one"):
            ask(url, later)
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1200, "height": 800})
                page.goto(url.removesuffix("/v1") + "/replay/ui")
                drawn = page.locator("tr.divergence")
                assert drawn.count() == 1
                text = drawn.inner_text()
                assert "volatile" in text and "messages[151].content" in text
                assert r"--mask '\b\d{4}-\d\d-\d\d\b'" in text and "a date" in text
                assert page.locator("tr.divergence mark").all_inner_texts() == [
                    "2026-12-05",
                    "2027-01-14",
                ]
                box = drawn.bounding_box()
                assert box is not None and box["height"] < 400  # one message, not 200
                shot = drawn.screenshot()
                (tmp_path / "divergence.png").write_bytes(shot)
                assert pixels_of(shot, AMBER) > 100  # both marked stretches
            finally:
                browser.close()
