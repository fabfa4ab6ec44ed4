"""An OTLP/HTTP trace receiver for tests: it decodes what the proxy's exporter posts to
/v1/traces (protobuf, with the OpenTelemetry proto package) and keeps each span with its
attributes, so a test can wait for the spans it expects. The real receiver (Arize Phoenix) is
tests/e2e/test_phoenix.py's; this one lets a test see every field, and stand for a collector that
holds a request and never answers.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import anyio
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


@dataclass
class Span:
    name: str
    trace_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    status: int  # 0 unset, 1 ok, 2 error
    resource: dict[str, Any]


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {a.key: _value(a.value) for a in pairs}


@dataclass
class Collector:
    spans: list[Span] = field(default_factory=list)
    hold: threading.Event | None = None  # given: every export waits on it (a collector that hangs)
    arrived: threading.Condition = field(default_factory=threading.Condition)
    posts: int = 0

    def app(self) -> Starlette:
        async def traces(request: Request) -> Response:
            body = await request.body()
            with self.arrived:
                self.posts += 1
                self.arrived.notify_all()
            if self.hold is not None:
                await anyio.to_thread.run_sync(self.hold.wait)
            sent = ExportTraceServiceRequest.FromString(body)
            got = []
            for rs in sent.resource_spans:
                resource = _attributes(rs.resource.attributes)
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        got.append(
                            Span(
                                s.name,
                                s.trace_id.hex(),
                                s.parent_span_id.hex(),
                                s.kind,
                                _attributes(s.attributes),
                                [(e.name, _attributes(e.attributes)) for e in s.events],
                                s.status.code,
                                resource,
                            )
                        )
            with self.arrived:
                self.spans.extend(got)
                self.arrived.notify_all()
            return Response(
                ExportTraceServiceResponse().SerializeToString(),
                media_type="application/x-protobuf",
            )

        return Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])])

    def wait(self, count: int, timeout: float = 30) -> list[Span]:
        """The first `count` spans, once they have come (an AssertionError if they do not)."""
        with self.arrived:
            came = self.arrived.wait_for(lambda: len(self.spans) >= count, timeout)
        assert came, f"{len(self.spans)} spans came, {count} expected"
        return self.spans[:count]

    def wait_posts(self, count: int, timeout: float = 30) -> None:
        with self.arrived:
            came = self.arrived.wait_for(lambda: self.posts >= count, timeout)
        assert came, f"{self.posts} exports came, {count} expected"
