"""What carrying a call's token ids costs, at a long run's sizes: a scripted turn whose recorded
prompt is 100k token ids rendered in each completion API, a 100-call rollout of growing prompts
(5 M ids in all) loaded, and the session written back as one NeMo-Gym line. Each is given as a
ratio to one `orjson.loads` of the same bytes, the cost of merely reading what is sent or read.
In process: the HTTP stack is the same with or without tokens, the rendering and reading are not.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import orjson

from proxy.apis import chat, responses
from proxy.formats import load_many
from proxy.formats.rollout import line
from proxy.replay.tokens import Tokens
from proxy.replay.trajectory import ToolCall, Turn

PROMPT_IDS = 100_000  # a late call of a long run: a 100k-token context
CALLS = 100  # a long rollout's model calls; its prompts grow to PROMPT_IDS
GENERATED = 300  # ids each call generates


def _best(runs: int, work: Callable[[], object]) -> float:
    """The fastest of `runs`, in milliseconds: the least disturbed by a noisy machine."""
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best * 1000


def _turn(tokens: Tokens | None) -> Turn:
    call = (ToolCall("call_1", "bash", '{"command": "ls -la"}'),)
    return Turn(1, 0, "Listing the files. " * 50, None, call, tokens=tokens)


RENDERERS: dict[str, Callable[[Turn], bytes]] = {
    "chat json": lambda t: chat.chat_completion(t, model="m", completion_id="c", created=1),
    "chat sse": lambda t: b"".join(
        chat.chat_stream(t, model="m", completion_id="c", created=1, include_usage=True)
    ),
    "responses json": lambda t: responses.response_object(t, {}, key="k", created=1),
    "responses sse": lambda t: b"".join(responses.response_events(t, {}, key="k", created=1)),
}


def rollout(rng: random.Random) -> bytes:
    """A NeMo-Gym line of CALLS calls, each with its prompt, generation and log-probabilities."""
    output: list[dict[str, Any]] = []
    prompt: list[int] = [rng.randrange(150_000) for _ in range(500)]
    step = (PROMPT_IDS - len(prompt)) // CALLS
    for k in range(CALLS):
        generated = [rng.randrange(150_000) for _ in range(GENERATED)]
        output.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"step {k}"}],
                "prompt_token_ids": prompt,
                "generation_token_ids": generated,
                "generation_log_probs": [-rng.random() for _ in range(GENERATED)],
            }
        )
        output.append({"type": "message", "role": "user", "content": "go on"})
        prompt = prompt + generated + [rng.randrange(150_000) for _ in range(step - GENERATED)]
    row = {
        "responses_create_params": {"input": [{"role": "user", "content": "the task"}]},
        "response": {"output": output[:-1], "usage": None},
    }
    return orjson.dumps(row)


def suite(runs: int = 5) -> dict[str, Any]:
    rng = random.Random(45)
    prompt = [rng.randrange(150_000) for _ in range(PROMPT_IDS)]
    tokens = Tokens("nemo-gym", prompt, prompt[:GENERATED], [-0.5] * GENERATED)
    with_tokens, without = _turn(tokens), _turn(None)
    results: dict[str, Any] = {"render": {}}
    for name, render in RENDERERS.items():
        body = render(with_tokens)
        whole = body if name.endswith("json") else b"null"  # a stream is no one JSON document
        results["render"][name] = {
            "kb": round(len(body) / 1024),
            "ms": round(_best(runs, partial(render, with_tokens)), 3),
            "ms_without_tokens": round(_best(runs, partial(render, without)), 3),
            "loads_ms": round(_best(runs, partial(orjson.loads, whole)), 3),
        }
    data = rollout(rng)
    [loaded] = load_many(data, name="r", filename="r")
    results["rollout"] = {
        "mb": round(len(data) / 1e6, 1),
        "calls": CALLS,
        "loads_ms": round(_best(runs, partial(orjson.loads, data)), 1),
        "load_ms": round(_best(runs, partial(load_many, data, name="r", filename="r")), 1),
        "export_ms": round(_best(runs, partial(line, loaded)), 1),
    }
    return results


def table(r: dict[str, Any]) -> str:
    lines = [
        f"a scripted turn with {PROMPT_IDS:,} prompt ids, rendered (ms; vs one orjson.loads of "
        "the JSON body)",
        f"{'api':>16} {'KB':>6} {'with ids':>9} {'without':>8} {'loads':>7} {'ratio':>6}",
    ]
    for name, m in r["render"].items():
        ratio = f"{m['ms'] / m['loads_ms']:.2f}x" if name.endswith("json") else "-"
        lines.append(
            f"{name:>16} {m['kb']:>6} {m['ms']:>9.2f} {m['ms_without_tokens']:>8.3f} "
            f"{m['loads_ms'] if name.endswith('json') else '-':>7} {ratio:>6}"
        )
    o = r["rollout"]
    lines.append(
        f"a {o['calls']}-call rollout of {o['mb']} MB: orjson.loads {o['loads_ms']} ms, loaded as "
        f"a script {o['load_ms']} ms ({o['load_ms'] / o['loads_ms']:.2f}x), written back as one "
        f"NeMo-Gym line {o['export_ms']} ms ({o['export_ms'] / o['loads_ms']:.2f}x)"
    )
    return "\n".join(lines)


def targets(r: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """Serving the ids costs less than reading the answer once; reading a rollout with them
    costs at most twice reading its JSON; writing it back, less than reading it."""
    worst = max(m["ms"] / m["loads_ms"] for n, m in r["render"].items() if n.endswith("json"))
    o = r["rollout"]
    return [
        (
            f"a turn with {PROMPT_IDS // 1000}k prompt ids rendered, vs one orjson.loads of it",
            f"{worst:.2f}x",
            "<= 1x",
            worst <= 1,
        ),
        (
            f"a {o['calls']}-call rollout with token ids loaded, vs one orjson.loads",
            f"{o['load_ms'] / o['loads_ms']:.2f}x",
            "<= 2x",
            o["load_ms"] <= 2 * o["loads_ms"],
        ),
        (
            "the session written back as one NeMo-Gym line, vs one orjson.loads of it",
            f"{o['export_ms'] / o['loads_ms']:.2f}x",
            "<= 1x",
            o["export_ms"] <= o["loads_ms"],
        ),
    ]
