"""A fake upstream that serves the Responses API over a WebSocket (GET /v1/responses, upgraded),
as the OpenAI API does, and over HTTP (the FakeUpstream it wraps) for everything else. It keeps
the frames and the upgrades' headers it received, and continues only from its socket's last
response, as the API does for `store: false`."""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from tests.helpers.servers import FakeUpstream

DROP = "drop"  # an answer that starts, then the socket closes
ERROR = "error"  # an error frame, 429, before any event
LAST = "last:"  # LAST + text: answered, then the socket is closed (an idle limit, a restart)


@dataclass
class SocketUpstream:
    http: FakeUpstream = field(default_factory=FakeUpstream)
    frames: list[dict[str, Any]] = field(default_factory=list)
    upgrades: list[dict[str, str]] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)  # each upgrade's query string
    answers: deque[str] = field(default_factory=deque)  # a text, DROP or ERROR; then a default
    answered = 0
    refusals: deque[int] = field(default_factory=deque)  # upgrades refused with these, first

    def refuse(self, *statuses: int) -> SocketUpstream:
        self.refusals.extend(statuses)
        return self

    def then(self, *answers: str) -> SocketUpstream:
        self.answers.extend(answers)
        return self

    @property
    def app(self) -> Starlette:
        http = self.http.app
        http.router.routes.insert(0, WebSocketRoute("/v1/responses", self._socket))
        return http

    async def _socket(self, ws: WebSocket) -> None:
        self.upgrades.append({k.lower(): v for k, v in ws.headers.items()})
        self.queries.append(ws.url.query)
        if self.refusals:
            await ws.send_denial_response(Response(status_code=self.refusals.popleft()))
            return
        await ws.accept()
        last = None
        try:
            while True:
                frame = json.loads(await ws.receive_text())
                self.frames.append(frame)
                previous = frame.get("previous_response_id")
                if previous is not None and previous != last:
                    await ws.send_text(_error(400, "previous_response_not_found"))
                    continue
                answer = self.answers.popleft() if self.answers else "live over a socket"
                if answer == ERROR:
                    await ws.send_text(_error(429, "rate_limit_exceeded"))
                    continue
                self.answered += 1
                rid = f"resp_up_{self.answered}"
                closing = answer.startswith(LAST)
                answer = answer.removeprefix(LAST)
                for event in _events(rid, frame.get("model"), answer):
                    await ws.send_text(json.dumps(event))
                    if answer == DROP and event["type"] == "response.output_text.delta":
                        await ws.close(1011)
                        return
                last = rid
                if closing:
                    await ws.close(1000)
                    return
        except WebSocketDisconnect:
            return


def _error(status: int, code: str) -> str:
    return json.dumps(
        {
            "type": "error",
            "status": status,
            "error": {"type": "invalid_request_error", "code": code, "message": f"said {code}"},
        }
    )


def _events(rid: str, model: Any, text: str) -> list[dict[str, Any]]:
    item = {"id": f"msg_{rid}", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip
    done = {"id": rid, "object": "response", "created_at": 1, "status": "completed",
            "model": model, "output": [item],
            "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}}  # fmt: skip
    return [
        {"type": "response.created", "response": {**done, "status": "in_progress", "output": []}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "status": "in_progress", "content": []},
        },
        {
            "type": "response.output_text.delta",
            "item_id": item["id"],
            "output_index": 0,
            "content_index": 0,
            "delta": text,
        },
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": done},
    ]
