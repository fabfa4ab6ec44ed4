"""The HTTP entry: the ASGI app uvicorn serves, and thin handlers.

front.py        the ASGI entry: the hot paths as plain ASGI, the rest through FastAPI
incoming.py     one request as the hot path reads it (bounded body, target as sent)
completions.py  POST /v1/chat/completions, /v1/responses, /v1/messages
forward.py      everything else under /v1, upstream as it came
recorded.py     strict mode outside the main lane: answers from the recording
answers.py      answers the proxy makes itself: SSE through sse-starlette, JSON in one piece
admin.py, health.py, ui.py, body.py   the admin API, /healthz and /metrics, the status page
"""
