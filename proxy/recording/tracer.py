"""Tracer: one OpenTelemetry span per completion the proxy answers, after the GenAI semantic
conventions, exported over OTLP when the standard OTEL_* variables ask for it.

A span is made from the tap's Exchange once the answer is complete (its start and end are the
exchange's own), so it costs nothing on the way through; the SDK's batch processor exports it from
a thread of its own, and a collector that is down or never answers costs a warning in the log, not
a request's time. What the span says:

    name                          "{operation} {model}" ("chat gpt-4o")
    gen_ai.operation.name         the API's (chat, generate_content)
    gen_ai.provider.name          the API's (openai, anthropic, gcp.gemini, gcp.vertex_ai, aws.bedrock)
    gen_ai.request.model          the model asked for; gen_ai.response.model, gen_ai.response.id
    gen_ai.usage.input_tokens     and output_tokens: as recorded, else the estimate the answer gave
    gen_ai.response.finish_reasons
    gen_ai.conversation.id        the session
    replay.session, replay.lane, replay.source, replay.turn, replay.trajectory, replay.fault,
    replay.verdict (a divergence's: changed or volatile)
    gen_ai.input.messages         and gen_ai.output.messages, only with
                                  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true

A request that carries a W3C `traceparent` gets its span in that trace; a divergence is a span
event (`replay.divergence`) and an error status.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson

from proxy.recording.recorder import Exchange
from proxy.replay.trajectory import Usage

if TYPE_CHECKING:  # the SDK is imported only when spans are exported (it takes 0.3 s)
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger("proxy.tracer")

ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
EXPORT_SECONDS = 5.0  # an export's limit unless OTEL_EXPORTER_OTLP_*TIMEOUT says (the SDK's is 10)
SHUTDOWN_SECONDS = 3.0  # what stopping may wait for the last spans; the SDK's own may take 30


class Tracer:
    def __init__(self, provider: TracerProvider, *, content: bool) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("replay-proxy")
        self.content = content  # the messages too (opted in)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> Tracer | None:
        """A Tracer when an OTLP endpoint is set and the SDK is not disabled; else None."""
        if not any(environ.get(name) for name in ENDPOINTS):
            return None
        if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            return None
        if environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
            return None
        named = "OTEL_SERVICE_NAME" in environ or "service.name=" in environ.get(
            "OTEL_RESOURCE_ATTRIBUTES", ""
        )
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        resource = Resource.create({} if named else {"service.name": "replay-proxy"})
        timeout = None
        if not any(
            v in environ
            for v in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
        ):
            timeout = EXPORT_SECONDS
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(timeout=timeout)))
        content = environ.get(CONTENT, "").strip().lower() in (
            "true",
            "1",
            "span_only",
            "span_and_event",
        )
        return cls(provider, content=content)

    def exchange(
        self,
        x: Exchange,
        *,
        operation: str,
        provider: str,
        model: str | None,
        usage: Usage | None,
        parent: Mapping[str, str],
        fault: str | None = None,
        trajectory: str | None = None,
        answer: Mapping[str, Any] | None = None,
        divergence: str | None = None,
        verdict: str | None = None,
    ) -> None:
        """The exchange as a span, started and ended at its own times."""
        from opentelemetry.propagate import extract
        from opentelemetry.trace import SpanKind, Status, StatusCode

        start = int(x.started * 1e9)
        end = start + int((x.duration_ms or 0.0) * 1e6)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "gen_ai.provider.name": provider,
            "gen_ai.conversation.id": x.session,
            "replay.session": x.session,
            "replay.lane": x.lane,
            "replay.source": x.source,
            "http.response.status_code": x.status,
        }
        if model:
            attributes["gen_ai.request.model"] = model
        if x.stream:
            attributes["gen_ai.request.stream"] = True
        if x.turn:
            attributes["replay.turn"] = x.turn
        if trajectory:
            attributes["replay.trajectory"] = trajectory
        if fault:
            attributes["replay.fault"] = fault
        if x.finish_reason:
            attributes["gen_ai.response.finish_reasons"] = [x.finish_reason]
        if answer:
            if isinstance(answer.get("model"), str):
                attributes["gen_ai.response.model"] = answer["model"]
            if isinstance(answer.get("id"), str):
                attributes["gen_ai.response.id"] = answer["id"]
        if usage is not None:
            attributes["gen_ai.usage.input_tokens"] = usage.input
            attributes["gen_ai.usage.output_tokens"] = usage.output
            if usage.estimated:
                attributes["replay.usage.estimated"] = True
        if self.content and x.message is not None:
            attributes["gen_ai.output.messages"] = orjson.dumps(
                [_output(x.message, x.finish_reason)]
            ).decode()
        context = extract(dict(parent)) if parent else None
        span = self.tracer.start_span(
            f"{operation} {model}" if model else operation,
            context=context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=start,
        )
        if divergence is not None:
            said = {"replay.reason": divergence[:2000], "replay.verdict": verdict or "changed"}
            span.add_event("replay.divergence", said, timestamp=end)
            span.set_attribute("replay.verdict", verdict or "changed")
        if x.status >= 400 or x.error:
            span.set_status(Status(StatusCode.ERROR, (x.error or "")[:500] or None))
            span.set_attribute("error.type", str(x.status) if x.status >= 400 else "incomplete")
        span.end(end_time=end)

    def shutdown(self) -> None:
        """Export what is left, waiting at most SHUTDOWN_SECONDS: the SDK's own shutdown cannot
        be bounded, and a collector that never answers would hold the proxy's exit."""
        done = threading.Thread(target=self.provider.shutdown, name="otel-shutdown", daemon=True)
        done.start()
        done.join(SHUTDOWN_SECONDS)
        if done.is_alive():
            log.warning("OpenTelemetry: the last spans were not exported in %ss", SHUTDOWN_SECONDS)


def _output(message: Mapping[str, Any], finish: str | None) -> dict[str, Any]:
    """An assistant message (chat form) in the conventions' shape: role, parts, finish reason."""
    parts: list[dict[str, Any]] = []
    content = message.get("content")
    if isinstance(content, str) and content:
        parts.append({"type": "text", "content": content})
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": fn.get("name"),
                "arguments": fn.get("arguments"),
            }
        )
    return {"role": "assistant", "parts": parts, "finish_reason": finish or "stop"}
