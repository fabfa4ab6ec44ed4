"""The HTTP entry: the ASGI app uvicorn serves, and thin handlers.

front.py        the ASGI entry: the hot paths as plain ASGI, the rest through FastAPI
incoming.py     one request as the hot path reads it (bounded body, target as sent)
completions.py  POST /v1/chat/completions, /v1/responses, /v1/messages
inflight.py     one completion request on its way, with what every step needs of it
handoff.py      the cut: the fence before it, the restore verdict, the live call after it
diverged.py     a divergence as its request is told it
forward.py      everything else under /v1, upstream as it came
recorded.py     outside the main lane, strict or fenced: answers from the recording
answers.py      answers the proxy makes itself: SSE through sse-starlette, JSON in one piece
admin.py, health.py, ui.py, body.py   the admin API, /healthz and /metrics, the status page
"""
