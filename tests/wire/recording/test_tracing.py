"""OpenTelemetry spans over real sockets: the official openai SDK -> the proxy under uvicorn, with
the standard OTEL_* variables pointing at an OTLP/HTTP receiver on loopback
(tests/helpers/collector.py decodes what the SDK's exporter posts). One span per completion, in
the harness's trace when it sends a traceparent, with the GenAI attributes and the replay's own;
a divergence is an event and an error; message content only when opted in; and a collector that
never answers holds no answer and no shutdown.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from proxy.app import create_app
from proxy.config import Settings
from tests.helpers.agent import RECORDED, TOOLS, client, start_messages
from tests.helpers.collector import Collector
from tests.helpers.servers import FakeUpstream, running, text

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE}-00f067aa0ba902b7-01"


@pytest.fixture
def collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[Collector]:
    sink = Collector()
    with running(sink.app()) as url:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")  # ms: spans go out as they end
        monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
        monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
        yield sink


def served(trajectory: Path, upstream: str | None = None) -> Any:
    return running(create_app(Settings(trajectory=(trajectory,), upstream=upstream)))


def ask(url: str, messages: list[dict[str, Any]], **headers: str) -> Any:
    c = client(url + "/v1", **{"x-session-affinity": "ses_otel", **headers})
    return c.chat.completions.create(model="gpt-test", messages=messages, tools=TOOLS)


def test_a_scripted_turn_is_a_span_in_the_harnesss_trace(
    collector: Collector, write_trajectory: Callable[..., Path]
) -> None:
    with served(write_trajectory(RECORDED)) as url:
        answer = ask(url, start_messages(), traceparent=TRACEPARENT)
        [span] = collector.wait(1)
    assert answer.choices[0].message.tool_calls[0].id == "call_A"
    assert span.name == "chat gpt-test"
    assert span.trace_id == TRACE and span.parent_span_id == "00f067aa0ba902b7"
    assert span.kind == 3  # SPAN_KIND_CLIENT
    a = span.attributes
    assert (a["gen_ai.operation.name"], a["gen_ai.provider.name"]) == ("chat", "openai")
    assert a["gen_ai.request.model"] == "gpt-test"
    assert a["gen_ai.conversation.id"] == a["replay.session"] == "ses_otel"
    assert (a["replay.lane"], a["replay.source"], a["replay.turn"]) == ("main", "scripted", "1/2")
    assert a["replay.trajectory"] == "run"
    assert a["gen_ai.response.finish_reasons"] == ["tool_calls"]
    # nothing recorded: the usage the answer gave, said to be an estimate
    assert a["gen_ai.usage.input_tokens"] == answer.usage.prompt_tokens
    assert a["gen_ai.usage.output_tokens"] == answer.usage.completion_tokens
    assert a["replay.usage.estimated"] is True
    assert "gen_ai.output.messages" not in a  # content only when opted in
    assert span.resource["service.name"] == "replay-proxy"


def test_a_divergence_is_an_event_and_an_error_and_the_live_part_a_span_of_its_own(
    collector: Collector, write_trajectory: Callable[..., Path]
) -> None:
    fake = FakeUpstream(fallback=text("Done live."))
    with running(fake.app) as up, served(write_trajectory(RECORDED), up + "/v1") as url:
        first = ask(url, start_messages(), **{"x-session-affinity": "ses_wrong"})
        collector.wait(1)
        call = first.choices[0].message.model_dump(exclude_none=True)
        call["tool_calls"][0]["id"] = "call_X"  # not the call the script made
        wrong = [*start_messages(), call, {"role": "tool", "tool_call_id": "call_X", "content": ""}]
        with pytest.raises(openai.NotFoundError):
            ask(url, wrong, **{"x-session-affinity": "ses_wrong"})
        diverged = collector.wait(2)[1]
        live = ask(url, [{"role": "user", "content": "hi"}], **{"x-session-affinity": "ses_live"})
        spans = collector.wait(3)
    assert diverged.status == 2 and diverged.attributes["http.response.status_code"] == 404
    [(name, event)] = diverged.events
    assert name == "replay.divergence" and "call_X" in event["replay.reason"]
    assert event["replay.verdict"] == diverged.attributes["replay.verdict"] == "changed"
    forwarded = spans[2]
    assert live.choices[0].message.content == "Done live."
    assert forwarded.attributes["replay.source"] == "upstream"
    assert forwarded.attributes["gen_ai.response.id"] == "chatcmpl-upstream"
    assert "replay.usage.estimated" not in forwarded.attributes


def test_message_content_is_in_the_span_only_when_opted_in(
    collector: Collector,
    write_trajectory: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    with served(write_trajectory(RECORDED)) as url:
        ask(url, start_messages())
        [span] = collector.wait(1)
    out = span.attributes["gen_ai.output.messages"]
    assert (
        '"tool_call"' in out and "touch notes.txt" in out and '"finish_reason":"tool_calls"' in out
    )


def test_a_collector_that_never_answers_holds_no_answer_and_no_shutdown(
    collector: Collector, write_trajectory: Callable[..., Path]
) -> None:
    collector.hold = threading.Event()  # every export waits until the test is done
    try:
        with served(write_trajectory(RECORDED)) as url:
            first = ask(url, start_messages())
            collector.wait_posts(1)  # the export is held, unanswered
            # while it is held, the next turn is answered all the same
            messages = [*start_messages(), first.choices[0].message.model_dump(exclude_none=True)]
            messages.append({"role": "tool", "tool_call_id": "call_A", "content": ""})
            messages.append({"role": "user", "content": "Remember to use ls -la."})
            second = ask(url, messages)
            assert second.choices[0].message.tool_calls[0].id == "call_B"
            assert httpx.get(url + "/healthz").status_code == 200
        # the server stopped with the export still held (the tracer's bounded wait)
        assert not collector.hold.is_set() and collector.spans == []
    finally:
        collector.hold.set()
