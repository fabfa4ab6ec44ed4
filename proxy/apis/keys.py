"""Where keys travel when no API says otherwise: the headers that carry a client's credential in
every dialect, and the plain dialect of the OpenAI-style APIs, which a forwarded request no API
claims goes in too.
"""

from __future__ import annotations

from proxy.upstream.dialect import Dialect

# a Bearer token (OAuth, Bedrock API keys), and the key headers of the OpenAI-style APIs and of
# Anthropic's (x-api-key; Azure's api-key)
COMMON = frozenset({b"authorization", b"x-api-key", b"api-key"})
# a Bearer, or the x-api-key the client sent (as the Anthropic SDK and Claude Code do)
PLAIN = Dialect(client_key=b"x-api-key", credentials=COMMON)
