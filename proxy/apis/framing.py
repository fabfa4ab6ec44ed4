"""How a stream's events cross the wire. Every API streams SSE except Amazon Bedrock, whose
InvokeModelWithResponseStream puts each event in a binary frame of the AWS event stream encoding
(proxy.apis.eventstream). The API modules write and read SSE events; an API's framing is applied
last on the way out (after a fault has cut the events) and first on the way back (a recording
keeps the SSE events, whatever the wire was)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Framing:
    content_type: bytes  # of a stream's answer
    # SSE events (one or more per piece) -> the pieces sent; None: the events as they are
    frame: Callable[[Sequence[bytes]], list[bytes]] | None = None
    # a stream's body as it came over the wire -> its SSE events; None: it is SSE
    unframe: Callable[[bytes], bytes] | None = None

    def out(self, events: Sequence[bytes]) -> list[bytes]:
        """The pieces that go over the wire for these SSE events."""
        return list(events) if self.frame is None else self.frame(events)

    def sse(self, body: bytes) -> bytes:
        """A stream's body, as the wire carried it, as SSE events."""
        return body if self.unframe is None else self.unframe(body)

    def carries(self, content_type: str) -> bool:
        """A forwarded answer of this content type is a stream."""
        return content_type.startswith(("text/event-stream", self.content_type.decode()))


SSE = Framing(b"text/event-stream; charset=utf-8")
