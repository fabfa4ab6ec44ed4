"""A policy gateway stand-in for the rollouts and resumes suites: answers every chat completion
(and Anthropic message) with the
rollout id it was addressed by (its path's, and its x-rollout-id header's), so that a client can
tell whether its call reached the gateway as its own rollout. Prints its URL, then serves."""

from __future__ import annotations

import asyncio
import socket

from aiohttp import web


async def completion(request: web.Request) -> web.Response:
    rollout = request.match_info["rollout"]
    said = f"live {rollout} {request.headers.get('x-rollout-id', '-')}"
    await request.read()
    return web.json_response(
        {
            "id": "chatcmpl-gateway",
            "object": "chat.completion",
            "created": 1,
            "model": "policy",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": said},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    )


async def message(request: web.Request) -> web.Response:
    """The same, as an Anthropic Messages answer (the resumes suite's Claude Code rollouts)."""
    rollout = request.match_info["rollout"]
    said = f"live {rollout} {request.headers.get('x-rollout-id', '-')}"
    await request.read()
    return web.json_response(
        {
            "id": f"msg_gateway_{rollout}",
            "type": "message",
            "role": "assistant",
            "model": "policy",
            "content": [{"type": "text", "text": said}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )


async def main() -> None:
    app = web.Application()
    app.router.add_post("/sessions/{rollout}/v1/chat/completions", completion)
    app.router.add_post("/sessions/{rollout}/v1/messages", message)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    site = web.SockSite(runner, sock, backlog=1024)
    await site.start()
    print(f"gateway listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
