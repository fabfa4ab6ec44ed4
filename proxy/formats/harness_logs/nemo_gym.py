"""NeMo-Gym rollouts: what `ng_collect_rollouts` writes, one rollout per JSONL line.

Each line is the resources server's verify response (nemo_gym/rollout_collection.py):

    {"responses_create_params": {"input": [...] or "text", "instructions": ..., "tools": [...]},
     "response": {Responses API response: "output": [message, reasoning, function_call,
                  function_call_output, ...]},
     "reward": ..., <verifier fields>, "_ng_task_index": ..., "_ng_rollout_index": ...}

Every line is a trajectory of its own, labelled with its 1-based line number. Its conversation is
`responses_create_params.input` followed by `response.output` (the agent appends the tool outputs
and, for a multi-turn environment, the environment's user messages to `output`), read as Responses
items (apis/responses_history.py), each model call with the token ids on its items
(proxy.replay.tokens). A line with no `response` is a conversation recorded in `input`
alone: its assistant messages are the turns. A file in which no line records an answer is a task
file (the inputs of a collection), not rollouts: an error says so. A line that cannot be read is
left out with its line number and reason while the others load. Notes name an item as
`line N, response.output[K]`. The reward, the verifier's fields and NeMo-Gym's bookkeeping
(`_ng_*`, `agent_ref`) are not turns: they are not read.

Two other shapes of a line:

- Transitions (`response.contains_transitions` true: the aviary, toolsandbox and verifiers
  agents): `response.output` is a list of lists, each the conversation so far as the model was
  sent it, so the last is the whole run and is the conversation (not `input`: the verifiers agent
  sends its environment's own prompt). A call's token ids are on its answer in the transition
  that produced it; later transitions resend the answer without them, so they are taken from there. Lists without that flag are refused (which is the run is
  not said), and so is a transition that is not the start of the last one (compared by role, text
  and call): the transitions are then not cumulative, and the last is not the whole run.
- Summary rows with no `responses_create_params` (published beside benchmarks, e.g. deepswe):
  `trajectory.output` holds the run's items, read alone (`trajectory.usage` is the whole run's).
"""

from __future__ import annotations

from typing import Any

from proxy.apis.responses_history import (
    ASSISTANT_SIDE,
    OWN_CALL,
    TOKEN_ITEM_FIELDS,
    items_to_chat,
)
from proxy.errors import LoadError
from proxy.formats.harness_logs.reader import Converted, Lines, Misfit, Reader
from proxy.replay.content import text_of

EXPECTED = (
    'NeMo-Gym rollouts: one JSON object per line with "responses_create_params" holding "input", '
    'and a "response" holding "output" (or a "trajectory" holding "output")'
)
NOT_COMPARED = frozenset({"id", "status", "prompt_token_ids", "generation_token_ids"})


def miss(lines: Lines) -> Misfit | None:
    # the first object decides (a broken first line is left out like any other)
    number, first = next(((n, v) for n, v in lines if isinstance(v, dict)), lines[0])
    where = f"line {number + 1}"
    if not isinstance(first, dict):
        return Misfit(f"expected {EXPECTED}: {where} is not an object")
    params = first.get("responses_create_params")
    if params is None and _trajectory_output(first) is not None:
        return None
    if not isinstance(params, dict):
        marks = int(isinstance(first.get("response"), dict))  # a recording has one too
        marks += int(isinstance(first.get("trajectory"), dict))
        return Misfit(
            f'expected {EXPECTED}: {where} has no "responses_create_params" object', marks
        )
    if not isinstance(params.get("input"), list | str):
        return Misfit(f'expected {EXPECTED}: {where}: "responses_create_params" has no "input"', 1)
    return None


def convert(lines: Lines, filename: str) -> list[Converted]:
    converted = [_rollout(index, row, filename) for index, row in lines]
    if not any(_answers(row) for _, row in lines):
        raise LoadError(
            filename,
            None,
            'NeMo-Gym task inputs, not rollouts: no line records an answer (no "response", and '
            'no assistant item in "input"); the rollouts are the file ng_collect_rollouts writes '
            "with +output_jsonl_fpath",
        )
    return converted


def _answers(row: Any) -> bool:
    """Whether a line records anything the model said (an empty output counts: a run that ended
    at once is a rollout too)."""
    if not isinstance(row, dict):
        return False
    if isinstance(row.get("response"), dict):
        return True
    if row.get("responses_create_params") is None and isinstance(row.get("trajectory"), dict):
        return True  # a summary row (refused by its line if its output is not a list)
    params = row.get("responses_create_params")
    given = params.get("input") if isinstance(params, dict) else None
    return isinstance(given, list) and any(
        isinstance(item, dict)
        and (item.get("role") == "assistant" or item.get("type") in ASSISTANT_SIDE)
        for item in given
    )


def _trajectory_output(row: dict[str, Any]) -> list[Any] | None:
    trajectory = row.get("trajectory")
    output = trajectory.get("output") if isinstance(trajectory, dict) else None
    return output if isinstance(output, list) else None


class _Refused(Exception):
    """A line that cannot be read, and why (its line is prefixed by the caller)."""


def _rollout(index: int, row: Any, filename: str) -> Converted:
    line = f"line {index + 1}"
    label = str(index + 1)
    if not isinstance(row, dict):
        return _refused(label, f"{line} is not a JSON object")
    params, response = row.get("responses_create_params"), row.get("response")
    if params is None and isinstance(row.get("trajectory"), dict):
        output = _trajectory_output(row)
        if output is None:
            return _refused(label, f'{line}: "trajectory" has no "output" list')
        return _read(index, [], output, "trajectory.output", None, filename)
    if not isinstance(params, dict):
        return _refused(label, f'{line} has no "responses_create_params" object')
    given = params.get("input")
    if isinstance(given, str):
        given = [{"role": "user", "content": given}]
    elif given is None:
        given = []
    elif not isinstance(given, list):
        return _refused(label, f"{line}: responses_create_params.input must be a list or a string")
    instructions = params.get("instructions")
    if not isinstance(instructions, str):
        instructions = None
    if response is None:
        return _read(index, given, [], "response.output", None, filename, instructions)
    if not isinstance(response, dict) or not isinstance(response.get("output"), list):
        return _refused(label, f'{line}: "response" has no "output" list')
    try:
        last = _last_transition(response)
    except _Refused as exc:
        return _refused(label, f"{line}, {exc}")
    if last is None:
        return _read(
            index, given, response["output"], "response.output", response, filename, instructions
        )
    # the last transition is the whole conversation as the model was sent it; each call's token
    # ids are on its answer in the transition that produced it (the later ones resend it bare)
    whole = f"response.output[{last}]"
    items = _with_generated_tokens(response["output"])
    return _read(index, [], items, whole, response, filename, instructions)


def _read(
    index: int,
    given: list[Any],
    output: list[Any],
    where: str,
    response: dict[str, Any] | None,
    filename: str,
    instructions: str | None = None,
) -> Converted:
    label = str(index + 1)
    try:
        messages, indexes = items_to_chat([*given, *output], filename, instructions=instructions)
    except LoadError as exc:  # its index is the item's position in input + output
        place = _place(index, exc.index if exc.index is not None else 0, len(given), where)
        return _refused(label, f"{place}: {exc.reason}")
    places = {k: _place(index, k, len(given), where) for k in indexes}
    if response is not None:  # the response's usage and time are its last model call's
        last = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
        if last is not None:
            last["usage"] = response.get("usage")
            last["created"] = response.get("created_at")
    return Converted(messages, indexes, label=label, places=places)


def _last_transition(response: dict[str, Any]) -> int | None:
    """The index of the last transition when `response.output` is transitions (None: it is
    items), after checking they are the conversation so far; else _Refused saying why not."""
    output: list[Any] = response["output"]
    flag = response.get("contains_transitions")
    lists = [isinstance(o, list) for o in output]
    if not any(lists):
        if flag is True and output:
            raise _Refused(
                "response.output[0]: is an item, but response.contains_transitions says the "
                "output is transitions (lists)"
            )
        return None
    if not all(lists):
        raise _Refused(
            f"response.output[{lists.index(False)}]: is an item among transitions (lists): an "
            "output is either items or transitions"
        )
    if flag is not True:  # NeMo-Gym says which it is; a list is not taken for the run unasked
        raise _Refused(
            f"response.output[{lists.index(True)}]: is a list, not an item, and "
            "response.contains_transitions does not say the output is transitions"
        )
    last = len(output) - 1
    whole = [_key(item) for item in output[last]]
    for k, transition in enumerate(output[:-1]):
        keys = [_key(item) for item in transition]
        if keys != whole[: len(keys)]:
            at = _parting(keys, whole)
            raise _Refused(
                f"response.output[{k}][{at}]: differs from response.output[{last}][{at}]: the "
                "transitions are not cumulative, so the last is not the whole run"
            )
    return last


def _with_generated_tokens(transitions: list[list[Any]]) -> list[Any]:
    """The last transition, each item given the token fields an earlier transition's copy of it
    carries and it does not (the transitions are cumulative: checked before)."""
    items = list(transitions[-1])
    for transition in transitions[:-1]:
        for k, item in enumerate(transition):
            mine = items[k]
            if isinstance(item, dict) and OWN_CALL in item and OWN_CALL not in mine:
                items[k] = {**mine, **{f: item[f] for f in TOKEN_ITEM_FIELDS if f in item}}
    return items


def _key(item: Any) -> Any:
    """What two copies of an item in successive transitions share: a message's role and text
    (the agent may resend an output message as an input one), a call's id, name and arguments."""
    if not isinstance(item, dict):
        return ("not an item", item)
    kind = item.get("type") or "message"
    if kind == "message":
        return (kind, item.get("role"), text_of(item.get("content")))
    if kind == "function_call":
        return (kind, item.get("call_id"), item.get("name"), item.get("arguments"))
    if kind == "function_call_output":
        return (kind, item.get("call_id"), text_of(item.get("output")))
    return (kind, {k: v for k, v in item.items() if k not in NOT_COMPARED})


def _parting(shorter: list[Any], longer: list[Any]) -> int:
    """Where `shorter` stops being the start of `longer`."""
    for k, key in enumerate(shorter):
        if k >= len(longer) or key != longer[k]:
            return k
    return len(shorter)


def _place(line: int, k: int, given: int, where: str = "response.output") -> str:
    if k < 0:
        return f"line {line + 1}, responses_create_params.instructions"
    if k < given:
        return f"line {line + 1}, responses_create_params.input[{k}]"
    return f"line {line + 1}, {where}[{k - given}]"


def _refused(label: str, reason: str) -> Converted:
    return Converted([], [], label=label, refused=reason)


READER = Reader(name="nemo-gym", lines=True, miss=miss, convert=convert)
# a file of one rollout parses as one JSON document, which JSONL readers never see
SINGLE = Reader(
    name="nemo-gym",
    lines=False,
    miss=lambda doc: miss([(0, doc)]),
    convert=lambda doc, filename: convert([(0, doc)], filename),
)
