"""Real mini-swe-agent in text mode: a run recorded live, then replayed from the recording and
from mini's own log, in resume mode (going live after a branch point) and strictly.

mini's text mode (`mini_textbased.yaml`, model class `litellm_textbased`) sends no `tools`: the
model's answer holds one ```mswea_bash_command block, mini runs it, and sends the output back as a
user message. Recorded: mini through the proxy with a record dir and no trajectory, against a fake
model that decides from the conversation it is sent (never from a counter). All its requests are
tool-less, so the recording holds them as tool-less exchanges; the chain of them is the script.

Resume: in a fresh repo, the recording replays its first three turns (`--replay-turns 3`), each
command runs once, and the fourth request (the submit) goes to the model with the replayed history.
Strict: the recording replays whole with no model at all. mini's own `traj.json` replays too.

Marked `harness`: `pytest -m "not harness"` skips it; .ci/run runs it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.responses import Response

from proxy.app import create_app
from proxy.config import Settings
from proxy.formats import load_all
from tests.e2e.test_harnesses import STEPS, TASK, installed
from tests.helpers.agent import scripted_session
from tests.helpers.harness.recipes import (
    MINI_TEXT,
    Run,
    assert_rebuilt,
    finished_its_own_way,
    mini_action,
    run,
)
from tests.helpers.servers import FakeUpstream, Seen, running, text

pytestmark = pytest.mark.harness

ANSWERS = [mini_action(step, f"step {k + 1}") for k, step in enumerate(STEPS)]
SUBMIT = MINI_TEXT.finish["text"]


def model(seen: Seen) -> Response:
    """The model, from the conversation: the next step after the answers it already holds."""
    body = seen.json
    assert not body.get("tools"), "mini's text mode sends no tools"
    done = sum(1 for m in body["messages"] if m.get("role") == "assistant")
    return text(ANSWERS[done] if done < len(ANSWERS) else SUBMIT)(seen)


@contextmanager
def serving_proxy(**settings: Any) -> Iterator[str]:
    """The proxy with these settings (as tests/conftest.py's `proxy`); yields its root URL."""
    settings.setdefault("insecure_admin", True)  # the tests read every session's status
    with running(create_app(Settings(**settings))) as url:
        yield url


def mini(root: str, folder: Path) -> Run:
    result = run(MINI_TEXT, root + "/v1", folder, TASK)
    assert finished_its_own_way(MINI_TEXT, result, folder), result.tail()
    assert_rebuilt(result.repo, result.tail())
    return result


@dataclass
class Recorded:
    recording: Path  # the one <session>.jsonl of the record dir
    own_log: Path  # mini's traj.json of the recorded run
    base: Path
    requests: list[Seen]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    base = tmp_path_factory.mktemp("text-based")
    installed("mini", base)
    fake = FakeUpstream(fallback=model)
    records = base / "recordings"
    with (
        running(fake.app) as upstream,
        serving_proxy(upstream=upstream + "/v1", record_dir=records) as root,
    ):
        mini(root, base / "record")
    files = sorted(records.iterdir())
    assert len(files) == 1, files
    return Recorded(files[0], base / "record" / "traj.json", base, fake.requests)


def test_a_text_mode_run_is_recorded_as_a_text_based_script(recorded: Recorded) -> None:
    assert len(recorded.requests) == 4 and not any(r.json.get("tools") for r in recorded.requests)
    for source in (recorded.recording, recorded.own_log):
        [script] = load_all(source)
        assert script.text_based, source
        assert [t.text for t in script.turns] == [*ANSWERS, SUBMIT], source
        # the observations mini sent back: its own template around each command's output
        observations = [t.follow_up[-1].content for t in script.turns[1:]]
        assert all("<returncode>0</returncode>" in str(o) for o in observations), observations


def test_the_recording_replays_three_turns_then_goes_live(recorded: Recorded) -> None:
    fake = FakeUpstream(fallback=model)
    with (
        running(fake.app) as upstream,
        serving_proxy(
            upstream=upstream + "/v1", trajectory=[recorded.recording], replay_turns=3
        ) as root,
    ):
        mini(root, recorded.base / "resume")
        session = scripted_session(root)
    # the model was asked once: for the submit, with the three replayed turns in the history
    [live] = fake.posts()
    answers = [m["content"] for m in live.json["messages"] if m["role"] == "assistant"]
    assert answers == ANSWERS
    assert session["turns_served"] == 3 and session["live_after_turn"] == 3, session
    assert session["divergences"] == 0 and session["observations"]["differing"] == 0, session
    assert session["complete"], session


def test_the_recording_replays_strictly_with_no_model(recorded: Recorded) -> None:
    with serving_proxy(trajectory=[recorded.recording], mode="strict") as root:
        mini(root, recorded.base / "strict")
        session = scripted_session(root)
    assert session["turns_served"] == 4 and session["complete"], session
    assert session["errors"] == 0 and session["divergences"] == 0, session


def test_minis_own_log_replays_whole(recorded: Recorded) -> None:
    fake = FakeUpstream(fallback=model)
    with (
        running(fake.app) as upstream,
        serving_proxy(upstream=upstream + "/v1", trajectory=[recorded.own_log]) as root,
    ):
        mini(root, recorded.base / "own-log")
        session = scripted_session(root)
    assert not fake.requests, [r.json["messages"][-1] for r in fake.requests]
    assert session["turns_served"] == 4 and session["divergences"] == 0, session
    assert session["complete"], session
