"""Real opencode continues its own session: a session of two rounds is recorded, then
replayed in resume mode and in strict mode.

Recorded: `opencode run TASK`, then `opencode run --continue FOLLOWUP` in the same repo and HOME,
through the proxy with a record dir and no trajectory, against a fake model that decides from the
conversation it is sent (never from a counter). It proves what opencode sends on `--continue`: the
same `x-session-affinity` on both runs, and the whole first round (its text answer included)
re-sent before the follow-up; so the proxy writes one `<session>.jsonl` holding 5 main-lane turns
in 2 rounds.

Resume: in a fresh repo, both commands replay from that recording with no tool-bearing request
reaching the model; each recorded command runs once; the session reports 5 turns served and no
divergence. A third `--continue` then goes live to the model.

Strict: both commands replay again with no upstream at all, every request compared with the
recorded one; the per-run values (the run's folder, in the system prompt's working directory and
workspace root and in the bash tool's temp folder, and the date) are masked.

Marked `harness`: `pytest -m "not harness"` skips it; .ci/run runs it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.responses import Response

from proxy.app import create_app
from proxy.config import Settings
from tests.helpers.agent import scripted_session
from tests.helpers.harness.install import Unavailable, install
from tests.helpers.harness.recipes import RECIPES, Run, assert_rebuilt, run
from tests.helpers.servers import FakeUpstream, Seen, running, text, tool_call

pytestmark = pytest.mark.harness

OPENCODE = RECIPES["opencode"]
TASK = "Set up the greeting files in this repository."
FOLLOWUP = "Now write the answer to answer.txt."
MORE = "one more thing"
STEPS = [
    "echo created > created.txt && echo step1 >> runs.log",
    "sed -i 's/old value/new value/' existing.txt && echo step2 >> runs.log",
    "echo $((6 * 7)) > answer.txt && echo step3 >> runs.log",
]
TURNS = 5  # round 1: two tool turns and a text answer; round 2: a tool turn and a text answer


def said(body: dict[str, Any], words: str) -> bool:
    return any(
        m.get("role") == "user" and words in json.dumps(m.get("content"))
        for m in body.get("messages", [])
    )


def model(seen: Seen) -> Response:
    """The model, from the conversation it is sent: tool results so far, and which prompts."""
    body = seen.json
    if not body.get("tools"):
        return text("Greeting files")(seen)  # opencode's title call
    if said(body, MORE):
        return text("Live answer.")(seen)
    results = sum(1 for m in body["messages"] if m.get("role") == "tool")
    followed = said(body, FOLLOWUP)
    if results < 2 or (followed and results == 2):
        arguments = json.dumps({"command": STEPS[results], "description": "run a step"})
        return tool_call("bash", arguments, f"call_rec_{results + 1}")(seen)
    return text("All done." if followed else "Part one is done.")(seen)


def tool_bearing(fake: FakeUpstream) -> list[Seen]:
    return [r for r in fake.posts() if r.json.get("tools")]


@contextmanager
def serving_proxy(**settings: Any) -> Iterator[str]:
    """The proxy with these settings (as tests/conftest.py's `proxy`); yields its root URL."""
    settings.setdefault("insecure_admin", True)  # the tests read every session's status
    with running(create_app(Settings(**settings))) as url:
        yield url


def conversation(root: str, folder: Path) -> list[Run]:
    """The two rounds, as a user types them: a task, then a follow-up in the same session."""
    first = run(OPENCODE, root + "/v1", folder, TASK)
    second = run(OPENCODE, root + "/v1", folder, FOLLOWUP, extra_args=["--continue"], again=True)
    return [first, second]


def check_workspace(runs: list[Run]) -> None:
    why = "\n".join(r.tail() for r in runs)
    assert [r.returncode for r in runs] == [0] * len(runs), why
    assert_rebuilt(runs[0].repo, why)


@dataclass
class Recorded:
    recording: Path  # the one <session>.jsonl of the record dir
    base: Path  # the folder every run of this module is under
    requests: list[Seen]  # what the model was sent while recording


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """Step 1, shared by the tests of this module."""
    base = tmp_path_factory.mktemp("conversation")
    try:
        install("opencode", base / "install-opencode.log")
    except Unavailable as exc:
        if os.environ.get("REPLAY_PROXY_REQUIRE_HARNESSES"):
            pytest.fail(f"opencode cannot be installed: {exc}")
        pytest.skip(f"opencode: {exc}")
    fake = FakeUpstream(fallback=model)
    records = base / "recordings"
    with (
        running(fake.app) as upstream,
        serving_proxy(upstream=upstream + "/v1", record_dir=records) as root,
    ):
        runs = conversation(root, base / "record")
    check_workspace(runs)
    files = sorted(records.iterdir())
    assert len(files) == 1, files
    return Recorded(files[0], base, fake.requests)


def test_opencode_continues_its_session_and_it_is_recorded_in_one_file(
    recorded: Recorded,
) -> None:
    # opencode keeps its session id across `run` and `run --continue`, on every call
    affinity = {r.headers.get("x-session-affinity") for r in recorded.requests}
    assert len(affinity) == 1 and None not in affinity, affinity
    [session] = affinity
    assert recorded.recording.name == f"{session}.jsonl"

    # the follow-up's first request re-sends round 1 whole, its text answer last
    asked = [r.json for r in recorded.requests if r.json.get("tools")]
    assert len(asked) == TURNS
    follow = next(body for body in asked if said(body, FOLLOWUP))
    shape = [(m["role"], bool(m.get("tool_calls"))) for m in follow["messages"][1:]]
    assert shape == [("user", False), *[("assistant", True), ("tool", False)] * 2,
                     ("assistant", False), ("user", False)], shape  # fmt: skip
    assert follow["messages"][-2]["content"] == "Part one is done."

    # both rounds in that one file: every main-lane request, and the title call
    lanes = [json.loads(line)["lane"] for line in recorded.recording.read_text().splitlines()]
    assert sorted(lanes) == ["main"] * TURNS + ["toolless"], lanes


def test_the_conversation_replays_then_goes_live(recorded: Recorded) -> None:
    recording, base = recorded.recording, recorded.base
    fake = FakeUpstream(fallback=model)
    folder = base / "resume"
    with (
        running(fake.app) as upstream,
        serving_proxy(upstream=upstream + "/v1", trajectory=[recording]) as root,
    ):
        runs = conversation(root, folder)
        during = tool_bearing(fake)
        main = scripted_session(root)
        third = run(OPENCODE, root + "/v1", folder, MORE, extra_args=["--continue"], again=True)
        after = scripted_session(root)
    assert not during, f"the model was asked during the script: {during[0].json['messages'][-1]}"
    check_workspace(runs)
    assert main["turns_served"] == TURNS and main["divergences"] == 0, main
    assert main["tool_results"]["returned"] == 3 and main["complete"], main

    assert third.returncode == 0, third.tail()
    live = tool_bearing(fake)
    assert live and all(said(r.json, MORE) for r in live), [r.json["messages"][-1] for r in live]
    history = live[0].json["messages"]  # the whole replayed conversation, then the new prompt
    assert [
        m["content"] for m in history if m["role"] == "assistant" and not m.get("tool_calls")
    ] == [
        "Part one is done.",
        "All done.",
    ]
    assert sum(m["role"] == "tool" for m in history) == 3 and said({"messages": history[-1:]}, MORE)
    assert after["phase"] == "live" and after["divergences"] == 0, after
    assert (third.repo / "runs.log").read_text() == "step1\nstep2\nstep3\n"


def test_the_conversation_replays_strictly_with_no_model(recorded: Recorded) -> None:
    recording, base = recorded.recording, recorded.base
    # the run's folder (working directory, workspace root, the bash tool's temp folder); the date
    masks = [r"/[\w./-]+/(?:repo|tmp/opencode)\b", r"Today's date: [^\n]*"]
    with serving_proxy(trajectory=[recording], mode="strict", mask=masks) as root:
        runs = conversation(root, base / "strict")
        main = scripted_session(root)
    check_workspace(runs)
    assert main["turns_served"] == TURNS and main["divergences"] == 0, main
    assert main["complete"] and main["errors"] == 0, main
