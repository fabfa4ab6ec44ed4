"""Anthropic's models on Google Vertex AI and Amazon Bedrock, through the official anthropic SDK's
own clients for them (AnthropicVertex, AnthropicBedrock: the model in the URL, a Bedrock stream
in AWS event stream frames, which the SDK reads with botocore): a chat trajectory replayed, then
the live turn forwarded upstream in the same API, recorded, and replayed strictly from the
recording. Each is one module and one row in proxy.apis."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
from botocore.eventstream import EventStreamBuffer

from proxy.apis import BEDROCK, VERTEX, Api
from proxy.apis.bedrock import frame, unframe
from proxy.apis.eventstream import BadFrame, message, messages
from tests.conftest import ProxyFactory
from tests.helpers.servers import FakeUpstream, anthropic_text
from tests.wire.apis.test_apis_sdk import BASH_ANTHROPIC, RECORDED, TASK

PROJECT, REGION = "proj-1", "us-east5"
BEDROCK_MODEL = "us.anthropic.claude-opus-4-5-20251101-v1:0"


def vertex(base: str, session: str) -> anthropic.AnthropicVertex:
    return anthropic.AnthropicVertex(
        region=REGION,
        project_id=PROJECT,
        access_token="ya29.client-token",  # the gateway's to replace: never sent on as is
        base_url=f"{base}/v1",
        max_retries=0,
        default_headers={"x-claude-code-session-id": session},
    )


def bedrock(base: str, session: str) -> anthropic.AnthropicBedrock:
    return anthropic.AnthropicBedrock(
        aws_access_key="AKIAIOSFODNN7EXAMPLE",
        aws_secret_key="wJalrXUtnFI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        aws_session_token="FwoGZXIvYXdzEXAMPLESESSION",
        aws_region="us-east-1",
        base_url=base,
        max_retries=0,
        default_headers={"x-claude-code-session-id": session},
    )


def loop(client: Any, model: str, stream: bool) -> tuple[list[Any], list[dict[str, Any]]]:
    """Two turns of the agent loop, each call's tool results sent back."""
    messages_: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    finals = []
    for _ in range(2):
        ask = {"model": model, "max_tokens": 512, "system": "You are terse.",
               "messages": messages_, "tools": [BASH_ANTHROPIC]}  # fmt: skip
        if stream:
            with client.messages.stream(**ask) as s:
                final = s.get_final_message()
        else:
            final = client.messages.create(**ask)
        finals.append(final)
        messages_.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in final.content],
            }
        )
        messages_.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": b.id, "content": "ran"}
                    for b in final.content
                    if b.type == "tool_use"
                ],
            }
        )
    return finals, messages_


CASES = [
    pytest.param(VERTEX, vertex, "claude-opus-4-5@20251101", id="vertex"),
    pytest.param(BEDROCK, bedrock, BEDROCK_MODEL, id="bedrock"),
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(("api", "client", "model"), CASES)
def test_a_trajectory_replays_then_goes_live_in_the_same_api(
    api: Api,
    client: Callable[[str, str], Any],
    model: str,
    stream: bool,
    proxy: ProxyFactory,
    upstream: tuple[FakeUpstream, str],
    write_trajectory: Callable[..., Path],
    tmp_path: Path,
) -> None:
    fake, upstream_url = upstream
    fake.then(anthropic_text("Done: 2 files."))
    record = tmp_path / "rec"
    with proxy(
        upstream=upstream_url,
        upstream_api_key="gateway-key",
        trajectory=[write_trajectory(RECORDED)],
        record_dir=record,
    ) as url:
        c = client(url.removesuffix("/v1"), f"{api.name}-1")
        finals, sent = loop(c, model, stream)
        first, second = finals
        assert [(b.id, b.input) for b in first.content if b.type == "tool_use"] == [
            ("call_L1", {"command": "ls"}),
            ("call_L2", {"command": "ls -a"}),
        ]
        assert first.model == model and second.content[-1].id == "call_W"
        ask = {"model": model, "max_tokens": 512, "messages": sent, "tools": [BASH_ANTHROPIC]}
        if stream:
            with c.messages.stream(**ask) as s:
                live = s.get_final_message()
        else:
            live = c.messages.create(**ask)
        assert live.content[0].text == "Done: 2 files."
        status = httpx.get(f"{url.removesuffix('/v1')}/replay/sessions/{api.name}-1").json()
    assert status["turns_served"] == 2
    [forwarded] = [r for r in fake.requests if r.method == "POST"]
    # upstream in the API's own path, under the base URL's root; the model stays in the URL
    if api is VERTEX:
        verb = "streamRawPredict" if stream else "rawPredict"
        where = f"/v1/projects/{PROJECT}/locations/{REGION}/publishers/anthropic/models/{model}"
        assert forwarded.path == f"{where}:{verb}"
    else:
        verb = "invoke-with-response-stream" if stream else "invoke"
        assert forwarded.path == f"/model/{BEDROCK_MODEL}/{verb}"
        assert "x-amz-security-token" not in forwarded.headers  # the client's, dropped
    assert "model" not in forwarded.json and forwarded.json["anthropic_version"]  # as sent
    assert forwarded.headers["authorization"] == "Bearer gateway-key"
    # the recording holds the live answer read back (a Bedrock stream unframed), and no key
    lines = [
        json.loads(line) for f in record.rglob("*.jsonl") for line in f.read_text().splitlines()
    ]
    [live_line] = [x for x in lines if x.get("source") == "upstream"]
    assert live_line["api"] == api.name and live_line["stream"] is stream
    assert live_line["message"]["content"] == "Done: 2 files."
    text = record.joinpath().as_posix()
    written = "".join(f.read_text() for f in record.rglob("*.jsonl"))
    for secret in ("ya29.client-token", "FwoGZXIvYXdzEXAMPLESESSION", "gateway-key"):
        assert secret not in written, (secret, text)

    # the recording, replayed strictly: the same calls answered as recorded, framed again
    fake.requests.clear()
    recording = next(record.rglob("*.jsonl"))
    with proxy(trajectory=[recording], mode="strict") as url:
        again, _ = loop(client(url.removesuffix("/v1"), f"{api.name}-2"), model, stream)
        assert [b.id for b in again[0].content if b.type == "tool_use"] == ["call_L1", "call_L2"]
    assert fake.requests == []


@pytest.mark.parametrize(("api", "client", "model"), CASES)
def test_errors_come_in_the_apis_own_shape(
    api: Api, client: Callable[[str, str], Any], model: str, proxy: ProxyFactory
) -> None:
    with proxy() as url:  # no script and no upstream: the proxy's own error
        c = client(url.removesuffix("/v1"), "e-1")
        with pytest.raises(anthropic.APIStatusError) as caught:
            c.messages.create(
                model=model, max_tokens=8, messages=[{"role": "user", "content": "hi"}]
            )
        body = caught.value.body
        assert caught.value.status_code == 503
        if api is BEDROCK:
            assert set(body) == {"message"} and "--upstream" in body["message"]
        else:
            assert body["type"] == "error" and "--upstream" in body["error"]["message"]


def test_bedrock_frames_read_by_botocore_and_back() -> None:
    """What the proxy writes is what botocore (the AWS SDK for Python) reads, event by event,
    and the proxy reads its own frames back; a frame cut or changed is refused, not misread."""
    events = [
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m"}}\n\n',
        b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"text":"\xc3\xa9"}}\n\n',
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    ]
    wire = b"".join(frame(events))
    buffer = EventStreamBuffer()
    buffer.add_data(wire)
    read = list(buffer)
    assert [m.headers for m in read] == [
        {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}
    ] * 3
    decoded = [base64.b64decode(json.loads(m.payload)["bytes"]) for m in read]
    assert decoded == [e.split(b"data: ", 1)[1].rstrip(b"\n") for e in events]
    assert unframe(wire) == b"".join(events)
    with pytest.raises(BadFrame, match=r"cut short|cut at"):
        messages(wire[:-3])
    changed = bytearray(wire)
    changed[40] ^= 1
    with pytest.raises(BadFrame, match="checksum"):
        messages(bytes(changed))
    error = message([(":message-type", "exception"), (":exception-type", "throttlingException")],
                    b'{"message":"slow down"}')  # fmt: skip
    assert json.loads(unframe(error).split(b"data: ")[1]) == {
        "type": "error", "error": {"type": "throttlingException", "message": "slow down"}
    }  # fmt: skip


def test_faults_on_a_bedrock_stream_are_cut_and_stalled_as_frames(
    proxy: ProxyFactory, write_trajectory: Callable[..., Path]
) -> None:
    """A fault cuts a stream's events, then frames what is kept: a drop leaves whole frames that
    botocore reads, none of them the tool call; a stall sends the first frame, then the rest; a
    429 comes in Bedrock's error shape."""
    script = write_trajectory(RECORDED)
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 64, "system": "You are terse.",
            "messages": [{"role": "user", "content": TASK}], "tools": [BASH_ANTHROPIC]}  # fmt: skip
    path = f"/model/{BEDROCK_MODEL}/invoke-with-response-stream"
    for fault in ("1:drop", "1:stall:0.05", "1:429:0.01"):
        with proxy(trajectory=[script], fault=[fault]) as url:
            base = url.removesuffix("/v1")
            headers = {"x-session-affinity": f"f-{fault}"}
            with httpx.stream("POST", base + path, json=body, headers=headers, timeout=30) as r:
                status, got = r.status_code, r.headers
                raw = b""
                try:
                    for piece in r.iter_raw():
                        raw += piece
                except httpx.RemoteProtocolError:
                    pass  # the cut: the connection closes before the body's end
        assert got["x-replay-fault"].startswith(fault.split(":")[1]), fault
        if fault == "1:429:0.01":
            assert status == 429 and set(json.loads(raw)) == {"message"}
            continue
        assert got["content-type"] == "application/vnd.amazon.eventstream"
        buffer = EventStreamBuffer()
        buffer.add_data(raw)
        events = [json.loads(base64.b64decode(json.loads(m.payload)["bytes"])) for m in buffer]
        kinds = [e["type"] for e in events]
        if fault == "1:drop":
            assert kinds and "message_stop" not in kinds
            assert not any(e.get("content_block", {}).get("type") == "tool_use" for e in events)
        else:  # stalled, then whole
            assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
            tools = [e["content_block"]["id"] for e in events if e["type"] == "content_block_start"
                     and e["content_block"]["type"] == "tool_use"]  # fmt: skip
            assert tools == ["call_L1", "call_L2"]
