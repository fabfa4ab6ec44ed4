"""NeMo-Gym rollouts: what `ng_collect_rollouts` writes, one rollout per JSONL line.

Each line is the resources server's verify response (nemo_gym/rollout_collection.py):

    {"responses_create_params": {"input": [...] or "text", "instructions": ..., "tools": [...]},
     "response": {Responses API response: "output": [message, reasoning, function_call,
                  function_call_output, ...]},
     "reward": ..., <verifier fields>, "_ng_task_index": ..., "_ng_rollout_index": ...}

Every line is a trajectory of its own, labelled with its 1-based line number. Its conversation is
`responses_create_params.input` followed by `response.output` (the agent appends the tool outputs
and, for a multi-turn environment, the environment's user messages to `output`), read as Responses
items (apis/responses_history.py). A line with no `response` is a conversation recorded in `input`
alone: its assistant messages are the turns. A file in which no line records an answer is a task
file (the inputs of a collection), not rollouts: an error says so. A line that cannot be read is
left out with its line number and reason while the others load. Notes name an item as
`line N, response.output[K]`. The reward, the verifier's fields and NeMo-Gym's bookkeeping
(`_ng_*`, `agent_ref`, token ids on the items) are not turns: they are not read.
"""

from __future__ import annotations

from typing import Any

from proxy.apis.responses_history import ASSISTANT_SIDE, items_to_chat
from proxy.errors import LoadError
from proxy.formats.harness_logs.reader import Converted, Lines, Miss, Reader

EXPECTED = (
    'NeMo-Gym rollouts: one JSON object per line with "responses_create_params" holding "input", '
    'and a "response" holding "output"'
)


def miss(lines: Lines) -> Miss | None:
    # the first object decides (a broken first line is left out like any other)
    number, first = next(((n, v) for n, v in lines if isinstance(v, dict)), lines[0])
    where = f"line {number + 1}"
    if not isinstance(first, dict):
        return Miss(f"expected {EXPECTED}: {where} is not an object")
    params = first.get("responses_create_params")
    if not isinstance(params, dict):
        marks = int(isinstance(first.get("response"), dict))  # a recording has one too
        return Miss(f'expected {EXPECTED}: {where} has no "responses_create_params" object', marks)
    if not isinstance(params.get("input"), list | str):
        return Miss(f'expected {EXPECTED}: {where}: "responses_create_params" has no "input"', 1)
    return None


def convert(lines: Lines, source: str) -> list[Converted]:
    converted = [_rollout(index, row, source) for index, row in lines]
    if not any(_answers(row) for _, row in lines):
        raise LoadError(
            source,
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
    params = row.get("responses_create_params")
    given = params.get("input") if isinstance(params, dict) else None
    return isinstance(given, list) and any(
        isinstance(item, dict)
        and (item.get("role") == "assistant" or item.get("type") in ASSISTANT_SIDE)
        for item in given
    )


def _rollout(index: int, row: Any, source: str) -> Converted:
    line = f"line {index + 1}"
    label = str(index + 1)
    if not isinstance(row, dict):
        return _refused(label, f"{line} is not a JSON object")
    params, response = row.get("responses_create_params"), row.get("response")
    if not isinstance(params, dict):
        return _refused(label, f'{line} has no "responses_create_params" object')
    output: Any = []
    if response is not None:
        if not isinstance(response, dict) or not isinstance(response.get("output"), list):
            return _refused(label, f'{line}: "response" has no "output" list')
        output = response["output"]
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
    try:
        messages, indexes = items_to_chat([*given, *output], source, instructions=instructions)
    except LoadError as exc:  # its index is the item's position in input + output
        where = _place(index, exc.index if exc.index is not None else 0, len(given))
        return _refused(label, f"{where}: {exc.reason}")
    places = {k: _place(index, k, len(given)) for k in indexes}
    if isinstance(response, dict):  # the response's usage and time are its last model call's
        last = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
        if last is not None:
            last["usage"] = response.get("usage")
            last["created"] = response.get("created_at")
    return Converted(messages, indexes, label=label, places=places)


def _place(line: int, k: int, given: int) -> str:
    if k < 0:
        return f"line {line + 1}, responses_create_params.instructions"
    if k < given:
        return f"line {line + 1}, responses_create_params.input[{k}]"
    return f"line {line + 1}, response.output[{k - given}]"


def _refused(label: str, reason: str) -> Converted:
    return Converted([], [], label=label, refused=reason)


READER = Reader(name="nemo-gym", lines=True, miss=miss, convert=convert)
# a file of one rollout parses as one JSON document, which JSONL readers never see
SINGLE = Reader(
    name="nemo-gym",
    lines=False,
    miss=lambda doc: miss([(0, doc)]),
    convert=lambda doc, source: convert([(0, doc)], source),
)
