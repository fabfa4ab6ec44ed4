"""A recording of a harness that calls its tools through text: every request was tool-less, so
the recording has no main-lane exchange; the tool-less exchanges that continue one another are the
steps, and anything else (a title call, a retry's discarded answer) stays a side exchange."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.formats import load_bytes

SYSTEM = {"role": "system", "content": "Act with ```bash blocks."}
TASK = {"role": "user", "content": "Create hello.txt."}
ACT1 = {"role": "assistant", "content": "```bash\necho hello > hello.txt\n```"}
OBS1 = {"role": "user", "content": "<returncode>0</returncode>"}
ACT2 = {"role": "assistant", "content": "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"}


def exchange(messages: list[dict[str, Any]], answer: dict[str, Any], **extra: Any) -> bytes:
    line = {
        "type": "exchange", "lane": "toolless", "api": "chat", "status": 200, "error": None,
        "method": "POST", "path": "/v1/chat/completions",
        "request": {"model": "m", "messages": messages}, "message": answer, **extra,
    }  # fmt: skip
    return orjson.dumps(line) + b"\n"


def load(*lines: bytes) -> Any:
    return load_bytes(b"".join(lines), name="rec", filename="rec.jsonl")


def test_the_chain_of_tool_less_exchanges_is_a_text_based_script() -> None:
    title = exchange(
        [{"role": "system", "content": "Make a title."}, TASK],
        {"role": "assistant", "content": "Hi"},
    )
    # the harness re-wraps the answer it echoes back: still the same conversation
    rewrapped = {"role": "assistant", "content": ACT1["content"] + "\n"}
    t = load(
        title,
        exchange([SYSTEM, TASK], ACT1),
        exchange([SYSTEM, TASK, rewrapped, OBS1], ACT2),
    )
    assert t.text_based and [turn.text for turn in t.turns] == [ACT1["content"], ACT2["content"]]
    assert [turn.recorded.index for turn in t.turns if turn.recorded] == [1, 2]
    assert [u.content for u in t.turns[1].follow_up] == [OBS1["content"]]
    assert [s.index for s in t.side] == [0]  # the title call


def test_a_retry_keeps_its_last_attempt_and_a_lone_tool_less_call_is_no_script() -> None:
    discarded = {"role": "assistant", "content": "```bash\nrm -rf /\n```"}
    t = load(
        exchange([SYSTEM, TASK], discarded),  # answered, then retried (a format error, say)
        exchange([SYSTEM, TASK], ACT1),
        exchange([SYSTEM, TASK, ACT1, OBS1], ACT2),
    )
    assert [turn.recorded.index for turn in t.turns if turn.recorded] == [1, 2]
    assert [s.index for s in t.side] == [0]
    alone = load(exchange([SYSTEM, TASK], ACT1))  # one call nothing continued: a side call
    assert alone.turns == () and [s.index for s in alone.side] == [0]
