"""An independent reading of published trajectory files, for the compatibility corpus.

Written from the raw JSON of each producer, without the proxy's readers: per trajectory, the model
calls (assistant steps) in order, each as the list of its tool-call ids (None for a call the file
records without an id). tests/unit/formats/test_corpus.py compares it with what the loader makes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Steps = list[list[str | None]]

CALL_TYPES = ("function_call", "custom_tool_call", "local_shell_call")


def _jsonl(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text") or "" for p in content if isinstance(p, dict))
    return ""


def nemo_gym_calls(path: Path) -> list[list[dict[str, Any]]]:
    """Each line: input then output; with transitions (response.contains_transitions), the last
    transition alone, the conversation as the model was last sent it; a summary row without
    responses_create_params, its trajectory.output. A model call is a run of reasoning,
    function_call and assistant message items; an item with its own generation_token_ids after
    another one that had them is the next call. Assistant text before the first user message (and
    before any call) is the environment's greeting; an empty call is replayed only as the last
    answer of the run. Each call kept: its tool-call ids ("ids") and the token fields of the item
    that carried them ("tokens", None when none did)."""
    out = []
    for row in _jsonl(path):
        if "responses_create_params" not in row:
            items = list(row["trajectory"]["output"])
        elif (row.get("response") or {}).get("contains_transitions") and row["response"]["output"]:
            # each answer carries its call's token ids in the transition it was made in
            made = {
                k: item
                for transition in row["response"]["output"]
                for k, item in enumerate(transition)
                if "generation_token_ids" in item
            }
            items = [made.get(k, item) for k, item in enumerate(row["response"]["output"][-1])]
        else:
            given = row["responses_create_params"].get("input") or []
            if isinstance(given, str):
                given = [{"role": "user", "content": given}]
            items = [*given, *(row.get("response") or {}).get("output", [])]
        users = [k for k, it in enumerate(items) if it.get("role") == "user"]
        first_user = users[0] if users else len(items)
        calls: list[dict[str, Any]] = []
        current: dict[str, Any] | None = None
        for k, item in enumerate(items):
            side = (
                item.get("type") in ("reasoning", "function_call")
                or item.get("role") == "assistant"
            )
            if not side:
                current = None
                continue
            own = "generation_token_ids" in item
            if current is None or (own and current["own"]):
                current = {"at": k, "ids": [], "text": "", "own": False, "tokens": None}
                calls.append(current)
            if own and not current["own"]:
                current["tokens"] = {
                    f: item.get(f)
                    for f in ("prompt_token_ids", "generation_token_ids", "generation_log_probs")
                }
            current["own"] = current["own"] or own
            if item.get("type") == "function_call":
                current["ids"].append(item.get("call_id"))
            elif item.get("type") != "reasoning":
                current["text"] += _text(item.get("content"))
        kept: list[dict[str, Any]] = []
        for n, call in enumerate(calls):
            said = bool(call["ids"]) or bool(call["text"].strip())
            if call["at"] < first_user and not kept and not call["ids"] and users:
                continue  # the greeting, or an empty message before the task
            if not said:
                later = any(c["ids"] or c["text"].strip() for c in calls[n + 1 :])
                if not later and not (kept and kept[-1]["ids"] == [] and not calls[n - 1]["text"]):
                    kept.append({**call, "ids": []})  # the empty last answer that was recorded
                continue
            kept.append(call)
        out.append(kept)
    return out


def nemo_gym(path: Path) -> list[Steps]:
    return [[call["ids"] for call in calls] for calls in nemo_gym_calls(path)]


def swe_agent(path: Path) -> list[Steps]:
    history = json.loads(path.read_text())["history"]
    agent = history[0].get("agent")
    return [
        [
            [c["id"] for c in m.get("tool_calls") or []]
            for m in history
            if m.get("role") == "assistant" and m.get("agent") == agent and not m.get("is_demo")
        ]
    ]


def mini_swe_agent(path: Path) -> list[Steps]:
    messages = json.loads(path.read_text())["messages"]
    return [
        [[c["id"] for c in m.get("tool_calls") or []] for m in messages if m["role"] == "assistant"]
    ]


def openhands_v0(path: Path) -> list[Steps]:
    """Actions of one model response share its id; an agent message is a text step."""
    steps: Steps = []
    seen: dict[str, int] = {}
    for event in json.loads(path.read_text()):
        if "action" not in event:
            continue
        meta = event.get("tool_call_metadata")
        if meta:
            response = meta["model_response"]["id"]
            if response not in seen:
                seen[response] = len(steps)
                steps.append([])
            steps[seen[response]].append(meta["tool_call_id"])
        elif event["action"] == "message" and event.get("source") == "agent":
            steps.append([])
    return [steps]


def llm_completions(path: Path) -> list[Steps]:
    doc = json.loads(path.read_text())
    replies = [m for m in doc["messages"] if m["role"] == "assistant"]
    replies.append(doc["response"]["choices"][0]["message"])
    return [[[c["id"] for c in m.get("tool_calls") or []] for m in replies]]


def codex(path: Path) -> list[Steps]:
    """Assistant-side response items up to the next token count or user/developer message."""
    steps: Steps = []
    current: list[str | None] | None = None
    for line in _jsonl(path):
        payload = line.get("payload", {})
        if line["type"] == "response_item":
            kind = payload.get("type")
            if kind in ("reasoning", *CALL_TYPES) or (
                kind == "message" and payload.get("role") == "assistant"
            ):
                if current is None:
                    current = []
                    steps.append(current)
                if kind in CALL_TYPES:
                    current.append(payload.get("call_id"))
            elif kind == "message" and payload.get("role") in ("user", "developer"):
                current = None
        elif line["type"] == "event_msg" and payload.get("type") == "token_count":
            current = None
    return [steps]


def claude_code(path: Path) -> list[Steps]:
    """Assistant lines of the main chain grouped by message.id (one line per content block)."""
    steps: Steps = []
    seen: dict[str, int] = {}
    for line in _jsonl(path):
        if line.get("type") != "assistant" or line.get("isSidechain"):
            continue
        message = line["message"]
        if message["id"] not in seen:
            seen[message["id"]] = len(steps)
            steps.append([])
        for block in message["content"]:
            if block.get("type") == "tool_use":
                steps[seen[message["id"]]].append(block["id"])
    return [steps]


READINGS = {
    "nemo-gym": nemo_gym,
    "swe-agent": swe_agent,
    "mini-swe-agent": mini_swe_agent,
    "openhands-v0": openhands_v0,
    "llm-completions": llm_completions,
    "codex": codex,
    "claude-code": claude_code,
}
