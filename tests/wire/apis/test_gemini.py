"""The Gemini API (generateContent, streamGenerateContent) end to end with the official
google-genai SDK, over real sockets: one chat trajectory served as Gemini candidates, side calls
and the live part forwarded to a fake Gemini upstream, divergence in Google's error shape, a run
recorded through the Gemini API and replayed strictly, faults, and the key kept out of what is
written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import errors, types

from proxy.formats import load_file
from tests.conftest import ProxyFactory
from tests.helpers.servers import FakeUpstream, gemini_call, gemini_text, running, session_status

MODEL = "gemini-2.5-pro"
SYSTEM = "You are terse."
TASK = "Count the files, then report."
KEY = "gm-client-secret-key-1234"
RECORDED = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": TASK},
    {
        "role": "assistant",
        "content": "<think>list first</think>Listing.",
        "tool_calls": [
            {"id": "call_G1", "type": "function", "function": {"name": "run_shell_command", "arguments": '{"command": "ls"}'}},
            {"id": "call_G2", "type": "function", "function": {"name": "run_shell_command", "arguments": '{"command": "ls -a"}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_G1", "content": "a\nb"},
    {"role": "tool", "tool_call_id": "call_G2", "content": ".\n..\na\nb"},
    {"role": "assistant", "content": "Two files."},
]  # fmt: skip
SHELL = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="run_shell_command",
            parameters_json_schema={
                "type": "object",
                "properties": {"command": {"type": "string"}},
            },
        )
    ]
)


def client(url: str, session: str, **headers: str) -> genai.Client:
    options = types.HttpOptions(
        base_url=url.removesuffix("/v1"), headers={"x-session-affinity": session, **headers}
    )
    return genai.Client(api_key=KEY, http_options=options)


def config(*, thoughts: bool = False, tools: bool = True) -> types.GenerateContentConfig:
    return types.GenerateContentConfig(
        system_instruction=SYSTEM,
        tools=[SHELL] if tools else None,
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        thinking_config=types.ThinkingConfig(include_thoughts=True) if thoughts else None,
    )


def task() -> list[types.Content]:
    return [types.Content(role="user", parts=[types.Part(text=TASK)])]


def answered(contents: list[types.Content], response: types.GenerateContentResponse) -> None:
    """What a harness does: keep the model's content, run the calls, send the responses."""
    assert response.candidates and response.candidates[0].content
    contents.append(response.candidates[0].content)
    outputs = {"ls": "a\nb", "ls -a": ".\n..\na\nb"}
    parts = [
        types.Part(
            function_response=types.FunctionResponse(
                id=call.id,
                name=call.name,
                response={"output": outputs[(call.args or {})["command"]]},
            )
        )
        for call in response.function_calls or []
    ]
    contents.append(types.Content(role="user", parts=parts))


def merged(chunks: list[types.GenerateContentResponse]) -> types.GenerateContentResponse:
    parts = [p for c in chunks if c.candidates for p in (c.candidates[0].content.parts or [])]  # type: ignore[union-attr]
    last = chunks[-1]
    return types.GenerateContentResponse(
        candidates=[
            types.Candidate(
                content=types.Content(role="model", parts=parts),
                finish_reason=last.candidates[0].finish_reason if last.candidates else None,
            )
        ]
    )


@pytest.fixture
def script(write_trajectory: Any) -> Path:
    path: Path = write_trajectory(RECORDED, name="gemini-run")
    return path


@pytest.mark.parametrize("stream", [False, True])
def test_a_chat_trajectory_replays_through_the_gemini_sdk_then_goes_live(
    proxy: ProxyFactory, script: Path, stream: bool, tmp_path: Path
) -> None:
    fake = FakeUpstream(fallback=gemini_text("Live answer."))
    dumps = tmp_path / "dumps"
    with (
        running(fake.app) as upstream,
        proxy(upstream=upstream + "/v1", trajectory=[script], dump_dir=dumps) as url,
    ):
        c = client(url, "g1")

        def ask(contents: list[types.Content], **options: Any) -> types.GenerateContentResponse:
            if stream:
                chunks = list(
                    c.models.generate_content_stream(
                        model=MODEL, contents=contents, config=config(**options)
                    )
                )
                return merged(chunks)
            return c.models.generate_content(
                model=MODEL, contents=contents, config=config(**options)
            )

        contents = task()
        first = ask(contents, thoughts=True)
        answered(contents, first)
        second = ask(contents)
        contents += [
            second.candidates[0].content,
            types.Content(role="user", parts=[types.Part(text="More?")]),
        ]  # type: ignore[index, list-item]
        live = ask(contents)
        session = session_status(url, "g1")
    parts = first.candidates[0].content.parts  # type: ignore[index, union-attr]
    assert parts is not None
    assert [(p.thought, p.text) for p in parts if p.text] == [
        (True, "list first"),
        (None, "Listing."),
    ]
    calls = [p.function_call for p in parts if p.function_call]
    assert [(f.id, f.name, f.args) for f in calls] == [  # type: ignore[union-attr]
        ("call_G1", "run_shell_command", {"command": "ls"}),
        ("call_G2", "run_shell_command", {"command": "ls -a"}),
    ]
    assert first.candidates[0].finish_reason == types.FinishReason.STOP  # type: ignore[index]
    assert second.text == "Two files." and live.text == "Live answer."
    assert session["turns_served"] == 2 and session["tool_results"]["returned"] == 2, session
    assert session["phase"] == "live" and session["observations"]["differing"] == 0, session
    # the live request: the replayed conversation, the key as the client sent it
    [forwarded] = fake.requests
    method = "streamGenerateContent" if stream else "generateContent"
    assert forwarded.path.endswith(f"/models/{MODEL}:{method}")  # the SDK's own version kept
    assert forwarded.path.startswith(("/v1/", "/v1beta/"))
    assert forwarded.headers["x-goog-api-key"] == KEY
    roles = [content["role"] for content in forwarded.json["contents"]]
    assert roles == ["user", "model", "user", "model", "user"]
    # the live completion is dumped (the scripted ones never are), with the replay/live boundary
    [dumped] = [json.loads(f.read_text()) for f in sorted(dumps.iterdir())]
    assert dumped["replay_prefix_message_count"] == 5 and dumped["turn"] == 3
    assert dumped["response"]["candidates"][0]["content"]["parts"] == [{"text": "Live answer."}]


def test_side_calls_go_upstream_and_take_no_turn(proxy: ProxyFactory, script: Path) -> None:
    fake = FakeUpstream(fallback=gemini_text("A title"))
    with (
        running(fake.app) as upstream,
        proxy(upstream=upstream + "/v1", trajectory=[script]) as url,
    ):
        c = client(url, "g2")
        title = c.models.generate_content(
            model="gemini-2.5-flash", contents=task(), config=config(tools=False)
        )
        first = c.models.generate_content(model=MODEL, contents=task(), config=config())
        session = session_status(url, "g2")
    assert title.text == "A title" and [f.id for f in first.function_calls or []] == [
        "call_G1",
        "call_G2",
    ]
    assert session["forwarded"]["toolless"] == 1 and session["turns_served"] == 1


def test_a_divergence_is_a_404_in_googles_shape(proxy: ProxyFactory, script: Path) -> None:
    with proxy(upstream="http://127.0.0.1:9/v1", trajectory=[script]) as url:
        c = client(url, "g3")
        contents = task()
        contents.append(
            types.Content(
                role="model",
                parts=[
                    types.Part(
                        function_call=types.FunctionCall(
                            id="call_X", name="run_shell_command", args={}
                        )
                    )
                ],
            )
        )
        contents.append(
            types.Content(
                role="user",
                parts=[types.Part(function_response=types.FunctionResponse(id="call_X", name="run_shell_command", response={"output": ""}))],
            )
        )  # fmt: skip
        with pytest.raises(errors.ClientError) as diverged:
            c.models.generate_content(model=MODEL, contents=contents, config=config())
    assert diverged.value.code == 404 and diverged.value.status == "NOT_FOUND"
    assert "contents[1].parts[0].functionCall.id" in str(diverged.value.message)


def test_a_client_that_sends_no_ids_back_is_matched_by_name(
    proxy: ProxyFactory, script: Path
) -> None:
    """The Gemini API does not require call ids: a history without them still holds turn 1."""
    body = {
        "systemInstruction": {"parts": [{"text": SYSTEM}]},
        "contents": [
            {"role": "user", "parts": [{"text": TASK}]},
            {"role": "model", "parts": [
                {"functionCall": {"name": "run_shell_command", "args": {"command": "ls"}}},
                {"functionCall": {"name": "run_shell_command", "args": {"command": "ls -a"}}},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "run_shell_command", "response": {"output": "a\nb"}}},
                {"functionResponse": {"name": "run_shell_command", "response": {"output": ".\n..\na\nb"}}},
            ]},
        ],
        "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}],
    }  # fmt: skip
    with proxy(upstream="http://127.0.0.1:9/v1", trajectory=[script]) as url:
        root = url.removesuffix("/v1")
        answer = httpx.post(
            f"{root}/v1beta/models/{MODEL}:streamGenerateContent",  # no alt=sse: a JSON array
            json=body,
            headers={"x-goog-api-key": KEY, "x-session-affinity": "g4"},
        )
        session = session_status(url, "g4")
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    chunks = answer.json()
    assert isinstance(chunks, list) and chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert chunks[0]["candidates"][0]["content"]["parts"] == [{"text": "Two files."}]
    assert answer.headers["x-replay-turn"] == "2/2"
    assert session["tool_results"]["returned"] == 2  # the id-less responses paired by name


def test_a_run_recorded_through_gemini_replays_strictly_and_keeps_no_key(
    proxy: ProxyFactory, tmp_path: Path
) -> None:
    fake = FakeUpstream()
    fake.then(gemini_call("run_shell_command", {"command": "ls"}, "up_1"), gemini_text("Done."))
    records = tmp_path / "records"

    def run(url: str, session: str) -> list[str]:
        c = client(url, session)
        contents = task()
        texts = []
        for _ in range(2):
            chunks = list(
                c.models.generate_content_stream(model=MODEL, contents=contents, config=config())
            )
            response = merged(chunks)
            texts.append(
                response.text or ",".join(f.id or "" for f in response.function_calls or [])
            )
            if not response.function_calls:
                break
            answered(contents, response)
        return texts

    with running(fake.app) as upstream, proxy(upstream=upstream + "/v1", record_dir=records) as url:
        assert run(url, "rec") == ["up_1", "Done."]
    [recording] = sorted(records.iterdir())
    written = recording.read_text()
    assert KEY not in written and '"api":"gemini"' in written.replace(" ", "")
    script = load_file(recording)
    assert [[c.id for c in t.tool_calls] for t in script.turns] == [["up_1"], []]
    with proxy(trajectory=[recording], mode="strict") as url:
        assert run(url, "rec") == ["up_1", "Done."]
        session = session_status(url, "rec")
        other = client(url, "rec-2")
        changed = config()
        changed.system_instruction = "You are verbose."
        with pytest.raises(errors.ClientError) as refused:  # the same task, another system prompt
            other.models.generate_content(model=MODEL, contents=task(), config=changed)
    assert session["turns_served"] == 2 and session["errors"] == 0, session
    assert refused.value.code == 404 and "differs from the recorded request" in str(
        refused.value.message
    )


def test_faults_and_the_upstream_key_on_the_gemini_api(proxy: ProxyFactory, script: Path) -> None:
    fake = FakeUpstream(fallback=gemini_text("side"))
    settings = {"trajectory": [script], "fault": ["1:429:0.01"], "upstream_api_key": "gm-proxy-key"}
    with running(fake.app) as upstream, proxy(upstream=upstream + "/v1", **settings) as url:
        c = client(url, "g5")
        with pytest.raises(errors.ClientError) as limited:
            c.models.generate_content(model=MODEL, contents=task(), config=config())
        again = c.models.generate_content(model=MODEL, contents=task(), config=config())
        root = url.removesuffix("/v1")
        side = httpx.post(
            f"{root}/v1beta/models/gemini-2.5-flash:generateContent?key={KEY}",
            json={"contents": [{"role": "user", "parts": [{"text": "title?"}]}]},
        )
        by_header = c.models.generate_content(
            model="gemini-2.5-flash", contents=task(), config=config(tools=False)
        )
    assert limited.value.code == 429 and limited.value.status == "RESOURCE_EXHAUSTED"
    assert [f.id for f in again.function_calls or []] == ["call_G1", "call_G2"]
    assert side.status_code == 200 and by_header.text == "side"
    in_query, in_header = fake.requests
    # the proxy's key goes the client's way, and the Gemini way: never as a Bearer token
    assert in_query.query == "key=gm-proxy-key"
    assert "x-goog-api-key" not in in_query.headers and "authorization" not in in_query.headers
    assert in_header.headers["x-goog-api-key"] == "gm-proxy-key" and not in_header.query
    assert "authorization" not in in_header.headers
    assert KEY not in json.dumps([r.headers for r in fake.requests])


def test_a_drop_of_a_one_event_answer_cuts_it_before_its_end(
    proxy: ProxyFactory, script: Path
) -> None:
    """A text turn is one event: the cut sends half of it, never its finishReason."""
    with proxy(upstream="http://127.0.0.1:9/v1", trajectory=[script], fault=["2:drop"]) as url:
        root = url.removesuffix("/v1")
        body = {
            "systemInstruction": {"parts": [{"text": SYSTEM}]},
            "contents": [
                {"role": "user", "parts": [{"text": TASK}]},
                {"role": "model", "parts": [
                    {"functionCall": {"id": "call_G1", "name": "run_shell_command", "args": {"command": "ls"}}},
                    {"functionCall": {"id": "call_G2", "name": "run_shell_command", "args": {"command": "ls -a"}}},
                ]},
            ],
            "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}],
        }  # fmt: skip
        got = b""
        with (
            pytest.raises(httpx.RemoteProtocolError),
            httpx.stream(
                "POST",
                f"{root}/v1beta/models/{MODEL}:streamGenerateContent?alt=sse",
                json=body,
                headers={"x-goog-api-key": KEY, "x-session-affinity": "g6"},
            ) as answer,
        ):
            for chunk in answer.iter_bytes():
                got += chunk
    assert got.startswith(b"data: {") and b"finishReason" not in got
