"""Loading trajectories: every format into one model, the skip rules, and errors with an index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proxy.errors import LoadError
from proxy.formats import load_bytes, load_file
from tests.conftest import ROOT


def call(call_id: str | None, name: str = "bash", arguments: object = '{"command": "ls"}') -> dict:
    c: dict = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if call_id is not None:
        c["id"] = call_id
    return c


def load(messages: object, name: str = "t") -> object:
    return load_bytes(json.dumps(messages).encode(), name=name, filename=f"{name}.json")


BASIC = [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "do the task"},
    {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
    {"role": "tool", "tool_call_id": "c1", "content": "file.txt"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [call("c2"), call("c3", "read", {"path": "a"})],
    },
    {"role": "tool", "tool_call_id": "c2", "content": "x"},
    {"role": "tool", "tool_call_id": "c3", "content": "y"},
    {"role": "assistant", "content": "All done."},
]


def test_canonical_array_becomes_a_script_of_turns() -> None:
    t = load(BASIC)
    assert t.format == "chat"
    assert t.task == "do the task"
    assert t.system == "sys"
    assert [len(turn.tool_calls) for turn in t.turns] == [1, 2, 0]
    assert [turn.number for turn in t.turns] == [1, 2, 3]
    assert [turn.index for turn in t.turns] == [2, 4, 7]
    assert t.turns[2].final and t.turns[2].text == "All done."
    assert t.turns[1].tool_calls[1].arguments == '{"path": "a"}'  # a dict is JSON-encoded
    assert t.tool_outputs == {"c1": "file.txt", "c2": "x", "c3": "y"}
    assert t.skipped == () and t.dropped == ()


@pytest.mark.parametrize(
    ("document", "fmt"),
    [
        ({"messages": BASIC}, "messages"),
        (
            {"messages": BASIC[:-1], "response": {"choices": [{"message": BASIC[-1]}]}},
            "llm_completions",
        ),
    ],
)
def test_wrapped_forms_load_the_same_script(document: object, fmt: str) -> None:
    t = load(document)
    assert t.format == fmt
    assert [turn.tool_calls for turn in t.turns] == [turn.tool_calls for turn in load(BASIC).turns]
    assert t.turns[-1].text == "All done."


def test_jsonl_one_message_per_line(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(json.dumps(m) for m in BASIC) + "\n\n")
    t = load_file(path)
    assert t.name == "run" and t.format == "jsonl"
    assert len(t.turns) == 3


def test_a_user_message_after_a_text_only_turn_opens_the_next_exchange() -> None:
    t = load(
        [
            *BASIC,
            {"role": "user", "content": "more"},
            {"role": "assistant", "tool_calls": [call("c9")]},
            {"role": "tool", "tool_call_id": "c9", "content": "out9"},
            {"role": "assistant", "content": "Done again."},
        ]
    )
    assert [turn.round for turn in t.turns] == [1, 1, 1, 2, 2]
    assert t.rounds == 2 and not t.dropped
    fourth = t.turns[3]
    assert [u.index for u in fourth.follow_up] == [8] and not fourth.users_before
    assert t.tool_outputs["c9"] == "out9"


def test_an_assistant_message_right_after_a_text_only_turn_is_dropped() -> None:
    t = load(
        [
            *BASIC,
            {"role": "assistant", "content": "And another thing."},
            {"role": "assistant", "tool_calls": [call("c9")]},
            {"role": "tool", "tool_call_id": "c9", "content": "out9"},
            {"role": "user", "content": "more"},
            {"role": "assistant", "content": "Sure."},
        ]
    )
    assert len(t.turns) == 4 and t.turns[3].text == "Sure." and t.turns[3].round == 2
    assert [n.index for n in t.dropped] == [8, 9, 10]
    assert "right after the text-only turn (message 7) with no user message between" in (
        t.dropped[0].reason
    )


def test_a_follow_up_with_no_answer_is_reported_not_spliced() -> None:
    t = load([*BASIC, {"role": "user", "content": "thanks"}])
    assert len(t.turns) == 3 and not t.trailing_users
    assert [n.index for n in t.skipped] == [8]
    assert "follow-up after the last answer, with no recorded answer" in t.skipped[0].reason


def test_empty_assistant_messages_are_skipped_and_reported() -> None:
    t = load(
        [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": ""},
            {"role": "assistant"},
            {"role": "assistant", "content": "<think>hmm</think>"},
            {"role": "assistant", "content": [], "tool_calls": [call("c1")]},
        ]
    )
    assert [n.index for n in t.skipped] == [1, 2, 3]
    assert (
        t.skipped[2].reason
        == "empty assistant message (reasoning only), followed by another answer"
    )
    assert len(t.turns) == 1 and t.turns[0].number == 1


def test_later_user_messages_attach_to_the_turn_they_precede_or_trail() -> None:
    t = load(
        [
            {"role": "user", "content": "task"},
            {"role": "assistant", "tool_calls": [call("c1")]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "user", "content": "also this"},
            {"role": "user", "content": [{"type": "text", "text": "and that"}]},
            {"role": "assistant", "tool_calls": [call("c2")]},
            {"role": "tool", "tool_call_id": "c2", "content": "ok"},
            {"role": "user", "content": "finally"},
        ]
    )
    assert t.turns[0].users_before == ()
    assert [u.index for u in t.turns[1].users_before] == [3, 4]
    assert t.turns[1].users_before[1].content == [{"type": "text", "text": "and that"}]
    assert [u.content for u in t.trailing_users] == ["finally"]


@pytest.mark.parametrize(
    ("message", "reasoning", "text"),
    [
        ({"content": "<think>plan it</think>\nNow act."}, "plan it", "Now act."),
        ({"content": "<think>a</think><think>b</think>go"}, "a\n\nb", "go"),
        ({"content": "visible", "reasoning_content": "rc"}, "rc", "visible"),
        ({"content": "visible", "reasoning": "r"}, "r", "visible"),
        (
            {"content": [{"type": "text", "text": "p1"}, {"type": "text", "text": "p2"}]},
            None,
            "p1\np2",
        ),
        ({"content": "<think>cut off while thinking"}, "cut off while thinking", ""),
    ],
)
def test_reasoning_never_becomes_visible_text(
    message: dict, reasoning: str | None, text: str
) -> None:
    t = load(
        [
            {"role": "user", "content": "task"},
            {"role": "assistant", "tool_calls": [call("c")], **message},
        ]
    )
    assert t.turns[0].reasoning == reasoning
    assert t.turns[0].text == text


def test_token_fields_are_kept_and_unknown_keys_ignored() -> None:
    t = load(
        [
            {"role": "user", "content": "task", "prompt_token_ids": [1, 2]},
            {
                "role": "assistant",
                "tool_calls": [call("c")],
                "generation_token_ids": [3],
                "generation_log_probs": [0.1],
                "routed_experts": [[1]],
                "whatever": True,
            },
        ]
    )
    assert len(t.turns) == 1
    tokens = t.turns[0].tokens
    assert tokens is not None and tokens.style == "nemo-gym"
    assert (tokens.prompt, tokens.generation, tokens.log_probs) == (None, [3], [0.1])
    assert tokens.routed_experts == [[1]]


@pytest.mark.parametrize(
    ("arguments", "expected"), [("", "{}"), (None, "{}"), ({}, "{}"), ('{"a":1}', '{"a":1}')]
)
def test_arguments_are_kept_verbatim_or_normalised(arguments: object, expected: str) -> None:
    t = load(
        [
            {"role": "user", "content": "task"},
            {"role": "assistant", "tool_calls": [call("c", arguments=arguments)]},
        ]
    )
    assert t.turns[0].tool_calls[0].arguments == expected


def test_missing_ids_get_deterministic_ids() -> None:
    doc = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "tool_calls": [call(None), call(None)]},
    ]
    first, again = load(doc), load(doc)
    ids = [c.id for c in first.turns[0].tool_calls]
    assert ids == [c.id for c in again.turns[0].tool_calls]
    assert len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)


def test_recorded_ids_are_kept_exactly() -> None:
    t = load(
        [
            {"role": "user", "content": "task"},
            {"role": "assistant", "tool_calls": [call("toolu_01AbC")]},
        ]
    )
    assert t.turns[0].tool_calls[0].id == "toolu_01AbC"


@pytest.mark.parametrize(
    ("messages", "index", "fragment"),
    [
        ([{"role": "user", "content": "t"}, "not a message"], 1, "not a JSON object"),
        (
            [
                {"role": "user", "content": "t"},
                {"role": "assistant", "tool_calls": [call("c", arguments="{bad")]},
            ],
            1,
            "not valid JSON",
        ),
        (
            [
                {"role": "user", "content": "t"},
                {"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]},
            ],
            1,
            "name is missing",
        ),
        (
            [
                {"role": "user", "content": "t"},
                {"role": "assistant", "tool_calls": [call("x"), call("x")]},
            ],
            1,
            "used twice",
        ),
        (
            [{"role": "user", "content": "t"}, {"role": "assistant", "tool_calls": "nope"}],
            1,
            "must be a list",
        ),
    ],
)
def test_errors_name_the_file_and_message_index(messages: list, index: int, fragment: str) -> None:
    with pytest.raises(LoadError) as caught:
        load(messages, name="bad")
    assert caught.value.index == index
    assert str(caught.value).startswith(f"bad.json:{index}: ")
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        ([{"content": "no role"}], "message 0 message has no role"),
        ([{"role": "user", "content": 5}], "message 0 content must be"),
        ({"foo": 1}, "not a list of messages or an object holding one"),
    ],
)
def test_a_file_wrong_from_its_start_is_in_no_known_format(messages: object, fragment: str) -> None:
    with pytest.raises(LoadError) as caught:
        load(messages, name="bad")
    assert caught.value.index is None
    assert str(caught.value).startswith(
        "bad.json: not a trajectory in a format this proxy reads; chat, Responses or Anthropic "
        "messages: "
    )
    assert fragment in str(caught.value)


def test_broken_json_and_unknown_shapes_are_load_errors(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="not valid JSON"):
        load_bytes(b'[{"role": "user",', name="x", filename="x.json")
    with pytest.raises(LoadError, match="empty"):
        load_bytes(b"  \n", name="x", filename="x.json")
    with pytest.raises(LoadError, match="cannot read"):
        load_file(tmp_path / "missing.json")
    path = tmp_path / "t.jsonl"
    path.write_text('{"role": "user", "content": "t"}\n{"role": "assistant", oops}\n')
    with pytest.raises(LoadError) as caught:
        load_file(path)
    assert caught.value.index == 1 and "line 2" in str(caught.value)


def test_the_bundled_example_loads() -> None:
    t = load_file(ROOT / "examples" / "greeting.json")
    assert len(t.turns) == 3
    assert [u.index for u in t.turns[2].users_before] == [6]
    assert t.turns[0].reasoning == "Start by creating the script."
