"""Strict comparison, pure: what counts as the same request across two runs, and how a miss is
explained (the JSON path of the first difference, with the text around it)."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.apis import FIELDS
from proxy.replay.normalize import compile_masks
from proxy.replay.strict import StrictReplay
from proxy.replay.trajectory import Recorded


def recorded(
    request: Any, *, index: int = 0, lane: str = "main", path: str = "/v1/chat/completions"
) -> Recorded:
    return Recorded(
        index, "chat", lane, "POST", path, request, 200, False, "application/json", b"{}"
    )


def body(call_id: str, arguments: str, date: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [
            {"role": "system", "content": f"Today is {date}."},
            {"role": "user", "content": "List the files."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "bash", "arguments": arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": "a.txt"},
        ],
        **extra,
    }


def test_ids_argument_layout_per_run_fields_and_masked_text_do_not_count() -> None:
    strict = StrictReplay(compile_masks([r"\d{4}-\d\d-\d\d"]), fields=FIELDS)
    then = recorded(body("call_abc", '{"command": "ls", "all": true}', "2026-11-30", stream=True))
    now = body(
        "call_xyz", '{"all":true,"command":"ls"}', "2026-12-04",
        prompt_cache_key="run-2", metadata={"user": "u"}, stream=False,
    )  # fmt: skip
    assert strict.compare(then, now) is None


def test_codex_item_metadata_does_not_count_but_the_text_beside_it_does() -> None:
    strict = StrictReplay((), fields=FIELDS)

    def item(turn: str, created: float, text: str) -> dict[str, Any]:
        meta = {"turn_id": turn, "create_time": created, "content_item_kinds": ["user.text"]}
        return {"type": "message", "role": "user", "internal_chat_message_metadata_passthrough":
                meta, "content": [{"type": "input_text", "text": text}]}  # fmt: skip

    then = recorded({"model": "m", "input": [item("t-1", 1.5, "List the files.")]})
    assert (
        strict.compare(then, {"model": "m", "input": [item("t-2", 9.25, "List the files.")]})
        is None
    )
    changed = strict.compare(then, {"model": "m", "input": [item("t-1", 1.5, "Delete them.")]})
    assert changed is not None and changed.path == "input[0].content[0].text"


def test_a_different_tool_result_is_named_by_its_path_with_the_text_around_it() -> None:
    strict = StrictReplay((), fields=FIELDS)
    then = recorded(body("call_a", "{}", "2026-11-30"))
    now = body("call_a", "{}", "2026-11-30")
    now["messages"][3]["content"] = "b.txt"
    difference = strict.compare(then, now)
    assert difference is not None
    assert difference.path == "messages[3].content"
    assert "a.txt" in difference.expected and "b.txt" in difference.actual


def test_side_requests_match_the_first_equal_one_of_their_lane_and_a_miss_names_the_closest() -> (
    None
):
    strict = StrictReplay((), fields=FIELDS)
    title = {"model": "m", "messages": [{"role": "user", "content": "Title for: list the files"}]}
    other = {"model": "m", "messages": [{"role": "user", "content": "Summarise the session"}]}
    side = [
        recorded(title, index=0, lane="toolless"),
        recorded(other, index=1, lane="toolless"),
        recorded(title, index=2, lane="subagent"),  # another lane: never a match for toolless
        recorded(title, index=3, lane="toolless"),
    ]
    where = {"lane": "toolless", "method": "POST", "path": "/v1/chat/completions"}
    assert strict.matching(side, body=title, **where) == [0, 3]
    near = {"model": "m", "messages": [{"role": "user", "content": "Title for: list the filez"}]}
    assert strict.matching(side, body=near, **where) == []
    miss = strict.closest(side, body=near, **where)
    assert (miss.candidates, miss.closest) == (3, 0)
    assert miss.difference is not None and miss.difference.path == "messages[0].content"
    nothing = strict.closest(side, body=near, lane="other", method="GET", path="/v1/models")
    assert (nothing.candidates, nothing.closest, nothing.difference) == (0, None, None)


def test_the_normal_forms_kept_are_bounded_by_bytes_least_recently_used_first() -> None:
    """Each reload of a recording makes new Recorded objects: their normal forms must not pile
    up. The bound is in bytes of the forms as serialised; what goes is what was least recently
    compared, and what goes is normalised again when asked for."""
    forms = [recorded(body(f"call_{n}", "{}", "2026-11-30"), index=n) for n in range(40)]
    size = len(orjson.dumps(StrictReplay((), fields=FIELDS).received(forms[0].request, None)))
    strict = StrictReplay((), cache_bytes=10 * size, fields=FIELDS)
    first = forms[0]
    for n, r in enumerate(forms):
        assert strict.compare(r, r.request) is None
        assert strict.compare(first, first.request) is None  # the first is used all along
        report = strict.cache_report()
        assert report["bytes"] <= 10 * size and report["entries"] == min(n + 1, 10)
    # the first stayed (used every time), the ones in between went, the newest are kept
    kept = {key[0] for key in strict._cache}
    assert id(first) in kept and id(forms[-1]) in kept and id(forms[1]) not in kept
    # one form over the bound alone is still kept: the step's next request reads it again
    tiny = StrictReplay((), cache_bytes=1, fields=FIELDS)
    assert tiny.compare(first, first.request) is None
    assert tiny.cache_report()["entries"] == 1
    assert tiny.compare(forms[1], forms[1].request) is None
    assert tiny.cache_report()["entries"] == 1 and id(forms[1]) in {k[0] for k in tiny._cache}
