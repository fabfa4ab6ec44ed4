"""How deeply JSON may nest: a request body past the limit is refused, and JSON text inside a
string (arguments, a tool's output) past it is compared as the text it is."""

from __future__ import annotations

import orjson

from proxy.apis import FIELDS
from proxy.nesting import MAX_DEPTH, embedded, too_deep
from proxy.replay.difference import first_difference
from proxy.replay.normalize import normalize


def nested(depth: int) -> str:
    return "[" * depth + '"x"' + "]" * depth


def test_too_deep_is_past_the_limit_and_not_before() -> None:
    assert not too_deep(orjson.loads(nested(MAX_DEPTH)))
    assert too_deep(orjson.loads(nested(MAX_DEPTH + 1)))


def test_embedded_json_is_read_up_to_the_limit_and_left_as_text_past_it() -> None:
    assert embedded('{"command": "ls"}') == {"command": "ls"}
    assert embedded("not json") is None
    assert embedded(nested(MAX_DEPTH)) is not None
    assert embedded(nested(MAX_DEPTH + 1)) is None
    assert embedded(nested(1000)) is None  # orjson reads it; nothing may walk it


def test_deep_arguments_are_compared_as_text_without_an_error() -> None:
    """Strict replay normalises tool-call arguments: deep ones used to end in a 500 (a
    RecursionError, or orjson refusing to write the value back out)."""
    call = {"function": {"name": "bash", "arguments": nested(1000)}}
    recorded = {"function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    got = normalize(call, body=False, fields=FIELDS)
    assert got["function"]["arguments"] == nested(1000)
    difference = first_difference(normalize(recorded, body=False, fields=FIELDS), got)
    assert difference is not None and difference.path == "function.arguments"
