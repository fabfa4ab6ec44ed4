"""The references for scripted turns, under the same uvicorn settings as the proxy: a bare
FastAPI endpoint returning the same JSON bytes from memory, and the same canned SSE events sent
through sse-starlette's EventSourceResponse, as an app built on it would send them.

    python -m bench.reference --port 0 --json answer.json --events answer.sse
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response
from sse_starlette import EventSourceResponse


def app(json_body: bytes, events: list[bytes]) -> FastAPI:
    api = FastAPI()

    async def stream() -> AsyncIterator[bytes]:
        for event in events:
            yield event

    @api.post("/v1/chat/completions")
    async def answer(request: Request) -> Response:
        body = await request.body()
        if b'"stream":true' in body or b'"stream": true' in body:
            return EventSourceResponse(stream())
        return Response(json_body, media_type="application/json")

    return api


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.reference")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--events", type=Path, required=True)
    args = parser.parse_args()
    events = [e + b"\n\n" for e in args.events.read_bytes().split(b"\n\n") if e.strip()]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as the proxy's
    sock.bind(("127.0.0.1", args.port))
    sock.listen(2048)
    print(f"bench reference listening on http://127.0.0.1:{sock.getsockname()[1]}/v1", flush=True)
    config = uvicorn.Config(
        app(args.json.read_bytes(), events), log_level="warning", access_log=False
    )
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
