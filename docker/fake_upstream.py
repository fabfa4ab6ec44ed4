"""A stand-in for the real LLM, for the compose checks in CI: every chat completion is answered
with one final text message (JSON or SSE, as asked). Standard library only."""

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TEXT = "All done: greet.py prints hello, world and out.txt holds its output."


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        message = {"role": "assistant", "content": TEXT}
        if body.get("stream"):
            chunk = {
                "id": "up",
                "object": "chat.completion.chunk",
                "model": body.get("model"),
                "choices": [{"index": 0, "delta": message, "finish_reason": "stop"}],
            }
            data, kind = (
                f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode(),
                "text/event-stream",
            )
        else:
            answer = {
                "id": "up",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model"),
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
            data, kind = json.dumps(answer).encode(), "application/json"
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        data = b'{"object": "list", "data": [{"id": "agent-model", "object": "model"}]}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


if __name__ == "__main__":
    ThreadingHTTPServer(("0.0.0.0", 9000), Handler).serve_forever()
