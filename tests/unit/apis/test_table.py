"""What the Api rows say beyond parsing and rendering, as the rest of the proxy reads it: the
fields strict replay numbers as ids and drops, taken from the rows and from nothing else."""

from __future__ import annotations

import dataclasses

from proxy.apis import APIS, BY_NAME, FIELDS, fields_of
from proxy.replay.difference import first_difference
from proxy.replay.normalize import normalize
from tests.helpers.plain_api import PLAIN


def test_the_comparisons_fields_are_the_rows_own_together() -> None:
    assert fields_of(APIS) == FIELDS
    assert FIELDS.ids == {"id", "tool_call_id", "call_id", "tool_use_id"}
    assert FIELDS.dropped == {"cache_control", "internal_chat_message_metadata_passthrough"}
    assert "cache_control" in BY_NAME["bedrock"].dropped_fields  # Anthropic's, on every cloud


def test_an_apis_own_id_field_is_numbered_and_its_own_marker_dropped() -> None:
    """A request of two runs of one agent: the API names its call reference `ref`, and marks the
    newest turn with `pin`, which moves. Its row says so, and both runs compare equal; told
    nothing of them, the comparison finds the difference."""
    own = dataclasses.replace(
        PLAIN, id_fields=frozenset({"ref"}), dropped_fields=frozenset({"pin"})
    )
    one = {"turns": [{"role": "tool", "ref": "r-81f", "output": "a.txt", "pin": 1}]}
    two = {"turns": [{"role": "tool", "ref": "r-02c", "output": "a.txt"}]}
    told = fields_of([*APIS, own])
    assert first_difference(normalize(one, fields=told), normalize(two, fields=told)) is None
    found = first_difference(normalize(one, fields=FIELDS), normalize(two, fields=FIELDS))
    assert found is not None and found.path.startswith("turns[0]")
    changed = {"turns": [{"role": "tool", "ref": "r-02c", "output": "b.txt"}]}
    assert first_difference(normalize(one, fields=told), normalize(changed, fields=told))
