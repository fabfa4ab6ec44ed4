"""NeMo-Gym rollouts: what `ng_collect_rollouts` writes, one rollout per JSONL line.

Each line is the resources server's verify response (nemo_gym/rollout_collection.py):

    {"responses_create_params": {"input": [...] or "text", "instructions": ..., "tools": [...]},
     "response": {Responses API response: "output": [message, reasoning, function_call,
                  function_call_output, ...]},
     "reward": ..., <verifier fields>, "_ng_task_index": ..., "_ng_rollout_index": ...}

Every line is a trajectory of its own, labelled with its 1-based line number. Its conversation is
`responses_create_params.input` followed by `response.output` (the agent appends the tool outputs
and, for a multi-turn environment, the environment's user messages to `output`), read as Responses
items (formats/responses.py): consecutive reasoning / assistant message / function_call items are
one assistant message, parallel calls included; a function_call_output is the tool result of its
call_id; `instructions` is the system prompt; a string `input` is one user message. Every message
of a line carries the line's index. The reward, the verifier's fields and NeMo-Gym's bookkeeping
(`_ng_*`, `agent_ref`, token ids on the items) are not turns: they are not read.
"""

from __future__ import annotations

from typing import Any

from proxy.errors import LoadError
from proxy.formats.reader import Converted, Lines, Miss, Reader
from proxy.formats.responses import items_to_chat

EXPECTED = (
    'NeMo-Gym rollouts: one JSON object per line with "responses_create_params" and a '
    '"response" holding "output"'
)


def miss(lines: Lines) -> Miss | None:
    number, first = lines[0]  # the framework never passes an empty file
    where = f"line {number + 1}"
    if not isinstance(first, dict):
        return Miss(f"expected {EXPECTED}: {where} is not an object")
    params, response = first.get("responses_create_params"), first.get("response")
    rollout = isinstance(response, dict) and isinstance(response.get("output"), list)
    marks = int(isinstance(params, dict)) + int(rollout)  # a recording has a "response" too
    if not isinstance(params, dict):
        return Miss(f'expected {EXPECTED}: {where} has no "responses_create_params" object', marks)
    if not rollout:
        # e.g. the `_materialized_inputs.jsonl` NeMo-Gym writes beside the rollouts
        return Miss(f'expected {EXPECTED}: {where} has no "response" with an "output" list', marks)
    return None


def convert(lines: Lines, source: str) -> list[Converted]:
    return [_rollout(index, row, source) for index, row in lines]


def _rollout(index: int, row: Any, source: str) -> Converted:
    line = f"line {index + 1}"
    if not isinstance(row, dict):
        raise LoadError(source, index, f"{line} is not a JSON object")
    params, response = row.get("responses_create_params"), row.get("response")
    if not isinstance(params, dict):
        raise LoadError(source, index, f'{line} has no "responses_create_params" object')
    if not isinstance(response, dict) or not isinstance(response.get("output"), list):
        raise LoadError(source, index, f'{line}: "response" has no "output" list')
    given = params.get("input")
    if isinstance(given, str):
        given = [{"role": "user", "content": given}]
    elif given is None:
        given = []
    elif not isinstance(given, list):
        raise LoadError(source, index, f"{line}: responses_create_params.input must be a list")
    instructions = params.get("instructions")
    if not isinstance(instructions, str):
        instructions = None
    output: list[Any] = response["output"]
    try:
        messages, _ = items_to_chat([*given, *output], source, instructions=instructions)
    except LoadError as exc:  # its index is the item's position in input + output
        k = exc.index if exc.index is not None else 0
        where = (
            f"responses_create_params.input[{k}]"
            if k < len(given)
            else f"response.output[{k - len(given)}]"
        )
        raise LoadError(source, index, f"{line}: {where}: {exc.reason}") from None
    return Converted(messages, [index] * len(messages), label=str(index + 1))


READER = Reader(name="nemo-gym", lines=True, miss=miss, convert=convert)
# a file of one rollout parses as one JSON document, which JSONL readers never see
SINGLE = Reader(
    name="nemo-gym",
    lines=False,
    miss=lambda doc: miss([(0, doc)]),
    convert=lambda doc, source: convert([(0, doc)], source),
)
