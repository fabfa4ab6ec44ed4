"""The script rules published rollouts needed: messages before the task are prompt, steps before
the first user message are turns, empty answers stand, missing call ids are made up and paired,
and separate model calls stay separate. The request parsers read a greeting as the loader does."""

from __future__ import annotations

import json
from typing import Any

import orjson

from proxy.apis.anthropic import parse_anthropic
from proxy.apis.chat import parse_chat
from proxy.apis.gemini import parse_gemini
from proxy.apis.responses import parse_responses
from proxy.formats import load_bytes
from proxy.formats.answer import synthetic_call_id
from proxy.formats.convert import to_messages
from proxy.replay.trajectory import Trajectory
from tests.unit.formats.test_convert import same_script
from tests.unit.formats.test_formats import call

GREETING = "Hi! How can I help you today?"


def load(doc: Any) -> Trajectory:
    """A list of Responses items is loaded as a Responses request's input."""
    if isinstance(doc, list) and any(isinstance(m, dict) and "type" in m for m in doc):
        doc = {"input": doc}
    return load_bytes(json.dumps(doc).encode(), name="t", filename="t.json")


def message(role: str, text: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "role": role,
        "content": [{"type": "input_text", "text": text}],
        **extra,
    }


def fc(call_id: str | None, name: str = "find_user", arguments: str = "{}") -> dict[str, Any]:
    item = {"type": "function_call", "name": name, "arguments": arguments}
    return item if call_id is None else {**item, "call_id": call_id}


def fco(call_id: str | None, output: str) -> dict[str, Any]:
    item = {"type": "function_call_output", "output": output}
    return item if call_id is None else {**item, "call_id": call_id}


TAU2 = [  # the shape of NeMo-Gym's tau2 rollouts: the environment's greeting comes first
    message("system", "You are a customer service agent."),
    message("assistant", GREETING),
    message("user", "I cancelled an order by mistake."),
    fc("call_1", "find_user_id_by_name_zip"),
    fco("call_1", "chen_smith_8425"),
    message("assistant", "The order is cancelled; I will transfer you."),
    fc("call_2", "transfer_to_human_agents"),
    fco("call_2", "Transfer successful"),
    message("assistant", "YOU ARE BEING TRANSFERRED TO A HUMAN AGENT."),
]


def test_a_greeting_before_the_task_is_prompt_not_a_turn() -> None:
    t = load(TAU2)
    assert t.task == "I cancelled an order by mistake."
    assert t.system == f"You are a customer service agent.\n{GREETING}"
    assert [[c.id for c in turn.tool_calls] for turn in t.turns] == [["call_1"], ["call_2"], []]
    assert t.skipped == () and t.dropped == ()
    chat = load(
        [
            {"role": "system", "content": "sys"},
            {"role": "assistant", "content": GREETING},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
        ]
    )
    assert chat.system == f"sys\n{GREETING}" and chat.task == "task" and len(chat.turns) == 1


def test_a_request_carrying_the_greeting_reads_it_as_prompt_on_every_api() -> None:
    chat = parse_chat(
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "assistant", "content": GREETING},
                {"role": "user", "content": "task"},
                {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
                {"role": "tool", "tool_call_id": "c1", "content": "out"},
            ],
        }
    )
    responses = parse_responses({"model": "m", "input": TAU2[:5]})
    anthropic = parse_anthropic(
        {
            "model": "m",
            "system": "sys",
            "messages": [
                {"role": "assistant", "content": GREETING},
                {"role": "user", "content": "task"},
            ],
        }
    )
    gemini = parse_gemini(
        {
            "contents": [
                {"role": "model", "parts": [{"text": GREETING}]},
                {"role": "user", "parts": [{"text": "task"}]},
            ]
        }
    )
    for conv in (chat, responses, anthropic, gemini):
        assert conv.system.endswith(GREETING), conv.api
        assert conv.task is not None
        assert all(GREETING not in r.text for r in conv.replies), conv.api
    assert [[c.id for c in r.calls] for r in chat.replies] == [["c1"]]
    assert [[c.id for c in r.calls] for r in responses.replies] == [["call_1"]]
    # the loader and the parser agree on the prompt, so a fingerprint finds the same session
    assert load(TAU2).system == responses.system


def test_an_answer_with_no_user_message_at_all_stays_a_turn() -> None:
    t = load([message("assistant", "```python\nprint(1)\n```")])
    assert t.task is None and [turn.text for turn in t.turns] == ["```python\nprint(1)\n```"]
    conv = parse_chat({"model": "m", "messages": [{"role": "assistant", "content": "hello"}]})
    assert [r.text for r in conv.replies] == ["hello"]


def test_steps_before_the_first_user_message_are_turns_and_the_late_user_opens_an_exchange() -> (
    None
):
    # NeMo-Gym's synthetic tau2 rollouts: the agent looks things up before any user line
    t = load(
        [
            message("system", "You are a library agent."),
            fc("c1", "get_patron"),
            fco("c1", "Bob"),
            message("assistant", "Thank you, Bob. The book is at the branch."),
            message("user", "Could you confirm once it has moved?"),
            fc("c2", "update_book"),
            fco("c2", "Updated"),
            message("assistant", "It has moved."),
        ]
    )
    assert t.task is None
    assert [[c.id for c in turn.tool_calls] for turn in t.turns] == [["c1"], [], ["c2"], []]
    assert [turn.round for turn in t.turns] == [1, 1, 2, 2]
    assert [u.content for u in t.turns[2].follow_up] == [
        [{"type": "text", "text": "Could you confirm once it has moved?"}]
    ]
    assert t.dropped == ()


def test_an_empty_answer_is_replayed_as_it_was_recorded() -> None:
    last = load([message("user", "Solve it."), message("assistant", "")])
    assert [(turn.text, turn.final) for turn in last.turns] == [("", True)]
    assert last.skipped == ()
    # more of the run after it: the harness would send the empty answer back and the request
    # parsers pass over empty messages, so it would be due again; it is skipped, as before
    t = load(
        [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "<think>nothing to say</think>"},
            {"role": "user", "content": "well?"},
            {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
            {"role": "tool", "tool_call_id": "c1", "content": "out"},
            {"role": "assistant", "content": "Fine."},
        ]
    )
    assert [([c.id for c in turn.tool_calls], turn.text) for turn in t.turns] == [
        (["c1"], ""),
        ([], "Fine."),
    ]
    assert [u.content for u in t.turns[0].users_before] == ["well?"]
    assert [n.index for n in t.skipped] == [1]
    assert "followed by more of the run" in t.skipped[0].reason
    # an empty message before the task is no answer of the script
    before = load([{"role": "assistant", "content": ""}, {"role": "user", "content": "task"}])
    assert before.turns == () and before.skipped[0].reason == (
        "empty assistant message before the task"
    )


def test_calls_without_ids_get_deterministic_ids_and_their_outputs_pair_by_order() -> None:
    items = [  # a LangChain agent's rollout: neither calls nor outputs carry a call_id
        {"role": "developer", "content": "Use the search_docs tool."},
        {"role": "user", "content": "does a quick action stay on one prompt?"},
        fc(None, "search_docs", '{"query": "quick action"}'),
        fco(None, "Title: Custom quick actions"),
        fc(None, "search_docs", '{"query": "prompt"}'),
        fco(None, "Title: Prompts"),
        message("assistant", '{"answer": "C"}'),
    ]
    t = load(items)
    again = load(items)
    ids = [[c.id for c in turn.tool_calls] for turn in t.turns]
    assert ids == [[synthetic_call_id(t.digest, 1, 0)], [synthetic_call_id(t.digest, 2, 0)], []]
    assert ids == [[c.id for c in turn.tool_calls] for turn in again.turns]
    assert [t.tool_outputs[i[0]] for i in ids[:2]] == [
        "Title: Custom quick actions",
        "Title: Prompts",
    ]
    assert t.skipped == ()


def tokens(n: int) -> dict[str, Any]:
    return {
        "prompt_token_ids": list(range(n)),
        "generation_token_ids": [1],
        "generation_log_probs": [0.0],
    }


def test_separate_model_calls_recorded_with_their_own_token_ids_are_separate_turns() -> None:
    # NeMo-Gym's tic-tac-toe: each move is a model call of its own; the board it was shown is not
    # in the rollout, only the growing prompt_token_ids say so
    moves = [message("assistant", f"<action>{k} 2</action>", **tokens(50 * k)) for k in (1, 2, 3)]
    t = load([message("user", "Start the game."), *moves])
    assert [turn.text for turn in t.turns] == [f"<action>{k} 2</action>" for k in (1, 2, 3)]
    assert t.text_based and t.dropped == ()
    # without the record of separate calls, consecutive items are one model response
    merged = load([message("user", "Start."), message("assistant", "a"), message("assistant", "b")])
    assert [turn.text for turn in merged.turns] == ["a\nb"]
    # one call's items (the token ids on its message, then its calls) stay one turn
    one = load(
        [
            message("user", "fix it"),
            message("assistant", "", **tokens(10)),
            fc("c1", "read_file"),
            fco("c1", "text"),
            message("assistant", "", **tokens(20)),
            fc("c2", "write_file"),
        ]
    )
    assert [[c.id for c in turn.tool_calls] for turn in one.turns] == [["c1"], ["c2"]]


def test_the_new_shapes_convert_to_chat_json_and_back() -> None:
    moves = [message("assistant", f"<action>{k}</action>", **tokens(k)) for k in (1, 2)]
    for doc in (
        TAU2,
        [message("user", "Solve it."), message("assistant", "")],
        [message("user", "Start."), *moves, message("assistant", "", **tokens(3))],
    ):
        original = load(doc)
        again = load_bytes(orjson.dumps(to_messages(original)), name="t", filename="t.json")
        assert again.dropped == () and again.skipped == ()
        same_script(original, again)


def test_a_reasoning_item_opens_the_next_model_call_once_the_last_one_is_recorded() -> None:
    # vLLM's items of one call: reasoning, then the message that carries the call's token ids
    t = load(
        [
            message("user", "Solve."),
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think 1"}]},
            message("assistant", "a", **tokens(5)),
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think 2"}]},
            message("assistant", "b", **tokens(9)),
        ]
    )
    assert [(turn.text, turn.reasoning) for turn in t.turns] == [("a", "think 1"), ("b", "think 2")]


def test_a_request_whose_agent_acted_before_any_user_line_has_no_task_as_its_script() -> None:
    doc = [
        {"role": "system", "content": "A"},
        {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "Bob"},
        {"role": "assistant", "content": "Hello Bob."},
        {"role": "user", "content": "u"},
        {"role": "system", "content": "B"},
        {"role": "assistant", "content": "ok"},
    ]
    script = load(doc)
    conv = parse_chat({"model": "m", "messages": doc[:5]})
    assert (script.task, script.system) == (None, "A")
    assert (conv.task, conv.system) == (None, "A")
