"""A replayed run shows up in Arize Phoenix: the proxy, told only the standard OTEL_* variables,
exports its spans over OTLP/HTTP (protobuf) to a real Phoenix server installed from the package
index, and Phoenix's REST API gives them back with the GenAI attributes and the replay's own, in
the harness's trace.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from proxy.app import create_app
from proxy.config import Settings
from tests.helpers import phoenix
from tests.helpers.agent import RECORDED, TOOLS, client, start_messages
from tests.helpers.harness.install import Unavailable
from tests.helpers.servers import FakeUpstream, running, text

pytestmark = pytest.mark.harness

TRACE = "0af7651916cd43dd8448eb211c80319c"


@pytest.fixture(scope="module")
def phoenix_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("phoenix")
    try:
        python = phoenix.install(folder / "install.log")
    except Unavailable as exc:
        if os.environ.get("REPLAY_PROXY_REQUIRE_HARNESSES"):
            pytest.fail(f"Arize Phoenix is required but could not be installed: {exc}")
        pytest.skip(f"Arize Phoenix could not be installed: {exc}")
    with phoenix.serving(python, folder) as url:
        yield url


def _spans(url: str, project: str, count: int) -> list[dict[str, Any]]:
    """The project's spans once `count` are there. Phoenix writes what it receives to its database
    in batches, so the REST API is asked again until they are (at most 30 s)."""
    waited = threading.Event()
    found: list[dict[str, Any]] = []
    for _ in range(150):
        got = httpx.get(f"{url}/v1/projects/{project}/spans", params={"limit": 100}, timeout=10)
        if got.status_code == 200:
            found = got.json()["data"]
            if len(found) >= count:
                return found
        waited.wait(0.2)
    raise AssertionError(f"{len(found)} spans in Phoenix's project {project}, {count} expected")


def test_a_replayed_then_live_run_is_in_phoenix(
    phoenix_url: str, write_trajectory: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = f"replay-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix_url)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={project}")
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    fake = FakeUpstream(fallback=text("All done, live."))
    trajectory = write_trajectory(RECORDED)
    with running(fake.app) as up:
        settings = Settings(trajectory=(trajectory,), upstream=up + "/v1")
        with running(create_app(settings)) as url:
            headers = {
                "x-session-affinity": "ses_phx",
                "traceparent": f"00-{TRACE}-b7ad6b7169203331-01",
            }
            c = client(url + "/v1", **headers)
            first = c.chat.completions.create(
                model="gpt-test", messages=start_messages(), tools=TOOLS
            )
            messages = [*start_messages(), first.choices[0].message.model_dump(exclude_none=True)]
            messages.append({"role": "tool", "tool_call_id": "call_A", "content": ""})
            messages.append({"role": "user", "content": "Remember to use ls -la."})
            second = c.chat.completions.create(model="gpt-test", messages=messages, tools=TOOLS)
            messages.append(second.choices[0].message.model_dump(exclude_none=True))
            messages.append({"role": "tool", "tool_call_id": "call_B", "content": "notes.txt"})
            messages.append({"role": "user", "content": "Now summarise what you did."})
            live = c.chat.completions.create(model="gpt-test", messages=messages, tools=TOOLS)
        # the server stopped: its tracer exported what was left
    assert live.choices[0].message.content == "All done, live."
    spans = sorted(_spans(phoenix_url, project, 3), key=lambda s: s["start_time"])
    assert [s["name"] for s in spans] == ["chat gpt-test"] * 3
    assert {s["context"]["trace_id"] for s in spans} == {TRACE}  # the harness's trace
    a = [s["attributes"] for s in spans]
    assert [x["replay.source"] for x in a] == ["scripted", "scripted", "upstream"]
    assert [x.get("replay.turn") for x in a] == ["1/2", "2/2", None]
    assert {x["gen_ai.provider.name"] for x in a} == {"openai"}
    assert {x["gen_ai.conversation.id"] for x in a} == {"ses_phx"}
    assert a[0]["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert a[2]["gen_ai.response.id"] == "chatcmpl-upstream"
    assert a[0]["gen_ai.usage.input_tokens"] == first.usage.prompt_tokens
    assert a[2]["gen_ai.usage.output_tokens"] == live.usage.completion_tokens
