"""Forwarding to the real LLM: what is not answered from a script goes upstream as it came.

    client.py       Upstream: the target URL, one send per request, failures in words
    dialect.py      how an API's requests go: path under the base URL, where the key travels
    headers.py      what crosses in each direction (hop-by-hop headers and Expect stay here)
    passthrough.py  PassThrough: the answer sent on as it arrives; a bounded copy to record
    pool.py         aiohttp's connection pool, TLS trust and forward proxy from the environment
    socket.py       Link: a client socket's live turns on a WebSocket to the upstream
    template.py     an upstream per session: {session} and {trajectory} filled in

The HTTP client is aiohttp's, chosen by measurement over httpx (with its own transport and with
httpx-aiohttp's): see the performance page of the docs.
"""

from proxy.upstream.client import Upstream
from proxy.upstream.passthrough import Captured, OnComplete, PassThrough
from proxy.upstream.pool import display

__all__ = ["Captured", "OnComplete", "PassThrough", "Upstream", "display"]
