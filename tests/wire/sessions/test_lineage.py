"""Each harness's own subagent headers, by default, over real sockets: a child's calls go upstream,
take no scripted turn of the root's session, and the status lists the child under its parent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from tests.conftest import ProxyFactory
from tests.helpers.agent import RECORDED, TOOLS, agent_step, client, follow, start_messages
from tests.helpers.servers import FakeUpstream, text


def test_a_codex_child_goes_upstream_and_the_root_keeps_its_turns(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    fake, upstream_url = upstream
    root = "019e1625-789d-76c0-80ab-3724b5ddb799"  # a Codex root: its session-id is its thread id
    with proxy(upstream=upstream_url, trajectory=[write_trajectory(RECORDED)]) as url:
        c = client(url, **{"session-id": root, "thread-id": root})
        messages = start_messages()
        first, h1 = agent_step(c, messages, stream=True)
        assert h1["x-replay-turn"] == "1/2"
        follow(messages, first)
        # a child spawned by spawn_agent: the root's session-id, its own thread-id, and the
        # request the root's next turn would answer
        fake.then(text("child answer"), text("review answer"))
        child = c.chat.completions.with_raw_response.create(
            model="m",
            messages=messages,
            tools=TOOLS,
            extra_headers={
                "thread-id": "019e1626-0000-7000-8000-00000000c41d",
                "x-openai-subagent": "collab_spawn",
                "x-codex-parent-thread-id": root,
            },
        )
        assert child.headers["x-replay-source"] == "upstream"
        assert child.headers["x-replay-session"] == root
        assert child.parse().choices[0].message.content == "child answer"
        # a review thread: the kind alone, no parent header (its parent is the session)
        review = c.chat.completions.with_raw_response.create(
            model="m",
            messages=messages,
            tools=TOOLS,
            extra_headers={"thread-id": "review-thread", "x-openai-subagent": "review"},
        )
        assert review.headers["x-replay-source"] == "upstream"
        second, h2 = agent_step(c, messages, stream=False)
        assert h2["x-replay-source"] == "scripted" and h2["x-replay-turn"] == "2/2"
        assert [t["id"] for t in second["tool_calls"]] == ["call_B"]
        base = url.removesuffix("/v1")
        state = httpx.get(f"{base}/replay/sessions/{root}").json()
        page = httpx.get(f"{base}/replay/ui").text
    assert state["turns_served"] == 2
    assert state["forwarded"] == {"main": 0, "toolless": 0, "subagent": 2}
    lanes = [
        {k: a[k] for k in ("child", "parent", "kind", "by", "requests")} for a in state["subagents"]
    ]
    assert lanes == [
        {
            "child": "019e1626-0000-7000-8000-00000000c41d",
            "parent": root,
            "kind": "collab_spawn",
            "by": "x-openai-subagent",
            "requests": 1,
        },
        {
            "child": "review-thread",
            "parent": root,
            "kind": "review",
            "by": "x-openai-subagent",
            "requests": 1,
        },
    ]
    assert "019e1626-0000-7000-8000-00000000c41d</code> (collab_spawn) of <code>" in page
    # both children's requests went upstream as they came: headers and all
    sent = fake.posts()
    assert [s.headers.get("x-openai-subagent") for s in sent] == ["collab_spawn", "review"]
    assert sent[0].headers["x-codex-parent-thread-id"] == root


def test_a_nested_claude_code_child_goes_upstream_under_its_parent_agent(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    fake, upstream_url = upstream
    with proxy(upstream=upstream_url, trajectory=[write_trajectory(RECORDED)]) as url:
        c = client(url, **{"x-claude-code-session-id": "ses_claude"})
        messages = start_messages()
        first, h1 = agent_step(c, messages, stream=False)
        assert h1["x-replay-turn"] == "1/2"
        follow(messages, first)
        fake.then(text("grandchild answer"), text("child answer"))
        # a child of a child: its own id, and its parent agent's
        nested = c.chat.completions.with_raw_response.create(
            model="m",
            messages=messages,
            tools=TOOLS,
            extra_headers={
                "x-claude-code-agent-id": "agent-b",
                "x-claude-code-parent-agent-id": "agent-a",
            },
        )
        assert nested.headers["x-replay-source"] == "upstream"
        # the parent-agent header alone marks a subagent too
        alone = c.chat.completions.with_raw_response.create(
            model="m",
            messages=messages,
            tools=TOOLS,
            extra_headers={"x-claude-code-parent-agent-id": "agent-a"},
        )
        assert alone.headers["x-replay-source"] == "upstream"
        _, h2 = agent_step(c, messages, stream=True)
        assert h2["x-replay-source"] == "scripted" and h2["x-replay-turn"] == "2/2"
        state = httpx.get(url.removesuffix("/v1") + "/replay/sessions/ses_claude").json()
    assert state["turns_served"] == 2 and state["forwarded"]["subagent"] == 2
    assert [(a["child"], a["parent"], a["kind"]) for a in state["subagents"]] == [
        ("agent-b", "agent-a", None),
        (None, "agent-a", None),
    ]
