"""OpenHands event lists, of either generation; the main list is the events, in order.

The OpenHands SDK (V1) keeps a conversation as one JSON event per file,
`<persistence_dir>/<conversation id hex>/events/event-<n>-<uuid>.json`; read as the list of those
files' events in index order. Each event has a `kind` (openhands/sdk/event):

- SystemPromptEvent -> the system message (`system_prompt` and `dynamic_context` texts);
- MessageEvent -> a user or assistant message (`llm_message`, plus `extended_content`);
- ActionEvent -> a tool call (`tool_call`: id, name, arguments); the ActionEvents of one
  `llm_response_id` are one assistant message, parallel calls, with the first one's `thought`
  as content and its `reasoning_content`;
- ObservationEvent, AgentErrorEvent, UserRejectObservation -> the tool message of `tool_call_id`;
- left out, with a note: condensations, state updates, pauses, token and log events.

OpenHands V0 (the app before the SDK) saves a trajectory as one JSON list of events, each an
`action` or an `observation` (openhands/events/serialization):

- an agent action with `tool_call_metadata` -> its `model_response` is the assistant message
  (content, reasoning_content, every tool call of the response); the actions of one model response
  id are one turn, parallel calls;
- an observation with `tool_call_metadata` -> the tool message of its `tool_call_id` (`content`);
- `message` -> a user or assistant message (`args.content`); `system` -> the system message;
- left out, with a note: agent state changes, recalls (OpenHands adds that context itself),
  condensations, null observations, actions without tool_call_metadata, and every event of a
  delegate (a subagent) between the `delegate` action and its observation.
"""

from __future__ import annotations

import json
from typing import Any

from proxy.errors import LoadError
from proxy.formats.harness_logs.reader import Converted, Misfit, Reader, Script

SDK_TOOL_RESULTS = {"ObservationEvent", "AgentErrorEvent", "UserRejectObservation"}
SDK_BOOKKEEPING = {  # openhands.sdk.event (1.58): events that are not messages
    "ConversationStateUpdateEvent", "PauseEvent", "TokenEvent", "LLMCompletionLogEvent",
    "HookExecutionEvent", "SecurityAnalysisEvent", "StreamingDeltaEvent", "InterruptEvent",
    "ConversationErrorEvent", "ACPToolCallEvent",
}  # fmt: skip
SDK_CONDENSER = {"Condensation", "CondensationRequest", "CondensationSummaryEvent"}
SDK_KINDS = {"SystemPromptEvent", "MessageEvent", "ActionEvent"} | SDK_TOOL_RESULTS
SDK_KINDS |= SDK_BOOKKEEPING | SDK_CONDENSER
SDK_ERROR_HEADER = "[An error occurred during execution.]\n"  # Observation.ERROR_MESSAGE_HEADER


def miss(doc: Any) -> Misfit | None:
    expected = "a JSON list of OpenHands events (SDK events, or V0 actions and observations)"
    if not isinstance(doc, list):
        return Misfit(f"expected {expected}: the document is not a list")
    first = doc[0] if doc else None
    if not isinstance(first, dict):
        return Misfit(f"expected {expected}: $[0] is not an object")
    kind = first.get("kind")
    v0 = isinstance(first.get("action"), str) or isinstance(first.get("observation"), str)
    if kind in SDK_KINDS or v0:
        return None
    if isinstance(kind, str):
        return Misfit(f"expected {expected}: $[0].kind {kind!r} is not an SDK event kind", 1)
    marks = int("source" in first and ("timestamp" in first or "id" in first))
    return Misfit(f'expected {expected}: $[0] has no "kind", "action" or "observation"', marks)


def convert(doc: Any, filename: str) -> list[Converted]:
    if doc and isinstance(doc[0], dict) and isinstance(doc[0].get("kind"), str):
        return [_sdk(doc, filename)]
    return [_v0(doc, filename)]


class _Builder(Script):
    """A Script whose open turn takes the next calls of its response."""

    def __init__(self) -> None:
        super().__init__()
        self.turn: tuple[str | None, dict[str, Any]] | None = None  # (response id, its message)


# -- the SDK -----------------------------------------------------------------------------------


def _sdk(events: list[Any], filename: str) -> Converted:
    out = _Builder()
    for index, event in enumerate(events):
        if not isinstance(event, dict) or not isinstance(event.get("kind"), str):
            raise LoadError(filename, index, 'event has no "kind"')
        kind = event["kind"]
        if kind == "SystemPromptEvent":
            parts = [event.get("system_prompt"), event.get("dynamic_context")]
            out.add({"role": "system", "content": _texts(parts)}, index)
            out.turn = None
        elif kind == "MessageEvent":
            llm = event.get("llm_message")
            if not isinstance(llm, dict) or llm.get("role") not in ("user", "assistant"):
                raise LoadError(filename, index, "llm_message.role must be user or assistant")
            content = _texts(_list(llm.get("content")) + _list(event.get("extended_content")))
            message: dict[str, Any] = {"role": llm["role"], "content": content}
            if llm["role"] == "assistant" and (thinking := _reasoning(llm)):
                message["reasoning_content"] = thinking
            out.add(message, index)
            out.turn = None
        elif kind == "ActionEvent":
            _sdk_action(out, event, filename, index)
        elif kind in SDK_TOOL_RESULTS:
            call_id = event.get("tool_call_id")
            if not isinstance(call_id, str):
                raise LoadError(filename, index, "tool_call_id must be a string")
            out.add({"role": "tool", "tool_call_id": call_id, "content": _sdk_result(event)}, index)
        elif kind in SDK_CONDENSER:
            out.note(index, f"{kind}: the SDK condenses its own view of the history")
        else:
            out.note(index, f"{kind}: not a message")
    return out.converted()


def _sdk_action(out: _Builder, event: dict[str, Any], filename: str, index: int) -> None:
    call = event.get("tool_call")
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise LoadError(filename, index, "tool_call must be an object with a name")
    response = (
        event.get("llm_response_id") if isinstance(event.get("llm_response_id"), str) else None
    )
    tool_call = {
        "id": call.get("id") or event.get("tool_call_id"),
        "type": "function",
        "function": {"name": call["name"], "arguments": call.get("arguments")},
    }
    if response is not None and out.turn is not None and out.turn[0] == response:
        out.turn[1]["tool_calls"].append(tool_call)
        return
    message: dict[str, Any] = {
        "role": "assistant",
        "content": _texts(_list(event.get("thought"))),
        "tool_calls": [tool_call],
    }
    if thinking := _reasoning(event):
        message["reasoning_content"] = thinking
    out.add(message, index)
    out.turn = (response, message)


def _sdk_result(event: dict[str, Any]) -> str:
    kind = event["kind"]
    if kind == "AgentErrorEvent":
        return str(event.get("error", ""))
    if kind == "UserRejectObservation":
        return f"Action rejected: {event.get('rejection_reason', 'User rejected the action')}"
    observation = _dict(event.get("observation"))
    header = [SDK_ERROR_HEADER] if observation.get("is_error") else []
    texts = [_texts(_list(observation.get("content")))]
    if observation.get("kind") == "TerminalObservation":
        texts = [_terminal(texts[0], observation.get("metadata"))]
    extra = _texts(_list(event.get("extended_content")))
    return "\n".join([*header, *texts, *([extra] if extra else [])])


def _terminal(text: str, metadata: Any) -> str:
    """TerminalObservation.to_llm_content (openhands-tools): what the model was sent."""
    if not isinstance(metadata, dict):
        return text
    out = f"{metadata.get('prefix') or ''}{text}{metadata.get('suffix') or ''}"
    if metadata.get("working_dir"):
        out += f"\n[Current working directory: {metadata['working_dir']}]"
    if metadata.get("py_interpreter_path"):
        out += f"\n[Python interpreter: {metadata['py_interpreter_path']}]"
    if metadata.get("exit_code", -1) != -1:
        out += f"\n[Command finished with exit code {metadata['exit_code']}]"
    return out


def _reasoning(holder: dict[str, Any]) -> str | None:
    text = holder.get("reasoning_content")
    if isinstance(text, str) and text:
        return text
    blocks = [
        b.get("thinking") for b in _list(holder.get("thinking_blocks")) if isinstance(b, dict)
    ]
    joined = "\n\n".join(b for b in blocks if isinstance(b, str) and b)
    return joined or None


# -- V0 ----------------------------------------------------------------------------------------


def _v0(events: list[Any], filename: str) -> Converted:
    out = _Builder()
    delegates = 0  # how many delegate (subagent) runs are open: their events are left out
    for index, event in enumerate(events):
        if not isinstance(event, dict) or ("action" not in event and "observation" not in event):
            raise LoadError(filename, index, 'event has neither "action" nor "observation"')
        kind = str(event.get("action") or event.get("observation"))
        is_action = "action" in event
        if delegates:  # inside a delegate's run, until its own `delegate` observation
            delegates += int(kind == "delegate") * (1 if is_action else -1)
            if delegates:
                out.note(index, f"{kind}: an event of a delegate agent (a subagent)")
                continue
        elif kind == "delegate" and is_action:
            delegates = 1
        metadata = event.get("tool_call_metadata")
        args = _dict(event.get("args"))
        if is_action and kind == "system":
            out.add({"role": "system", "content": str(args.get("content", ""))}, index)
            out.turn = None
        elif is_action and kind == "message":
            role = "user" if event.get("source") == "user" else "assistant"
            out.add({"role": role, "content": str(args.get("content") or "")}, index)
            out.turn = None
        elif is_action and isinstance(metadata, dict) and event.get("source") == "agent":
            _v0_action(out, metadata, filename, index)
        elif not is_action and isinstance(metadata, dict):
            call_id = metadata.get("tool_call_id")
            if not isinstance(call_id, str):
                raise LoadError(filename, index, "tool_call_metadata.tool_call_id must be a string")
            out.add({"role": "tool", "tool_call_id": call_id, "content": _v0_text(event)}, index)
        else:
            out.note(index, _v0_why(kind, is_action, event.get("source")))
    return out.converted()


def _v0_action(out: _Builder, metadata: dict[str, Any], filename: str, index: int) -> None:
    response: Any = metadata.get("model_response")
    try:
        message = response["choices"][0]["message"]
        response_id = str(response["id"])
    except (TypeError, KeyError, IndexError):
        raise LoadError(
            filename, index, "tool_call_metadata.model_response has no id and choices[0].message"
        ) from None
    if out.turn is not None and out.turn[0] == response_id:
        return  # a further action of the same response: its call is already in the turn
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if not isinstance(calls, list) or not calls:
        raise LoadError(filename, index, "model_response's message has no tool_calls")
    assistant: dict[str, Any] = {
        "role": "assistant",
        "content": message.get("content") or "",
        "tool_calls": [_v0_call(call, filename, index) for call in calls],
    }
    if thinking := _reasoning(message):
        assistant["reasoning_content"] = thinking
    assistant["usage"], assistant["created"] = response.get("usage"), response.get("created")
    out.add(assistant, index)
    out.turn = (response_id, assistant)


def _v0_call(call: Any, filename: str, index: int) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise LoadError(filename, index, "a tool call of model_response has no function name")
    return {
        "id": call.get("id"),
        "type": "function",
        "function": {"name": function["name"], "arguments": function.get("arguments")},
    }


def _v0_text(event: dict[str, Any]) -> str:
    content = event.get("content")
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def _v0_why(kind: str, is_action: bool, filename: Any) -> str:
    if kind in ("recall", "agent_state_changed", "change_agent_state", "null", "condensation"):
        reasons = {
            "recall": "OpenHands adds this context itself",
            "condensation": "OpenHands condenses its own view of the history",
        }
        return f"{kind}: {reasons.get(kind, 'not a message')}"
    if is_action:
        return f"{kind} action from {filename} without tool_call_metadata: no tool call to replay"
    return f"{kind} observation without tool_call_metadata: no tool call answered"


# -- shared ------------------------------------------------------------------------------------


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _texts(parts: list[Any]) -> str:
    """Text content parts joined as the chat API sees a list of them (images are left out)."""
    texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "\n".join(texts)


READER = Reader(name="openhands", lines=False, miss=miss, convert=convert)
