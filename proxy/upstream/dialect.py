"""How an API's requests go upstream: where the path goes under the base URL, how the key travels.

An API's row in proxy.apis names its dialect; a forwarded request no API claims goes as OPENAI.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Dialect:
    # the path keeps its version (/v1beta/...) and goes under the base URL's root, so a base path
    # ending in /v1 (an upstream that serves both, as a LiteLLM proxy does) loses that /v1;
    # otherwise /v1/... goes under the base URL, which already ends in /v1
    keeps_version: bool = False
    # the key goes in x-goog-api-key, or in the ?key= the client sent (Google's way), not as a
    # Bearer or x-api-key
    google_key: bool = False


OPENAI = Dialect()  # OpenAI's and Anthropic's: the credential header the client sent
GOOGLE = Dialect(keeps_version=True, google_key=True)
