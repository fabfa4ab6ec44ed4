"""The other LLM mock servers a user chooses between, each installed into a cache of its own,
configured from the benchmark's scripted turn (bench.throughput: a text and one `bash` call) and
started on a loopback port.

    aimock        npm @copilotkit/aimock: a fixture file matched on the user message
    llm-mock-api  PyPI: a rules file matched on the user message
    llmock        PyPI: a scenario posted to its control API after start (its file holds none)
    litellm       PyPI litellm[proxy]: the gateway with a CustomLLM handler that answers the turn

Each is set to the fewest events it can send and no delay between them. The cache is
$REPLAY_PROXY_PEER_CACHE, else ~/.cache/replay-proxy/peers; nothing is installed twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench import procs
from bench.throughput import CALL_ARGUMENTS, CALL_ID, CALL_NAME, SAID, TASK

CACHE = Path(
    os.environ.get("REPLAY_PROXY_PEER_CACHE", Path.home() / ".cache/replay-proxy/peers")
).expanduser()


@dataclass(frozen=True)
class Peer:
    name: str
    version: str
    runtime: str  # what serves the requests, for the comparison's honesty
    apis: dict[str, str]  # the APIs it serves, each with its path prefix
    install: Callable[[Path], None]  # into this folder, once
    configure: Callable[[Path], None]  # write its configuration of the turn into a work folder
    argv: Callable[[Path, Path, int], list[str]]  # (install folder, work folder, port)
    ready: str = "/health"  # a path that answers once it listens
    after_start: Callable[[str, Path], None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)  # on every request (a key it demands)

    @property
    def home(self) -> Path:
        return CACHE / self.name

    @contextmanager
    def running(self, work: Path) -> Iterator[tuple[str, int]]:
        """Install (once), configure and start it; yields its root URL and pid."""
        self.home.parent.mkdir(parents=True, exist_ok=True)
        self.install(self.home)
        self.configure(work)
        port = procs.free_port()
        url = f"http://127.0.0.1:{port}"
        argv = self.argv(self.home, work, port)
        with procs.polled(argv, url + self.ready, work / f"{self.name}.log", self.env) as pid:
            if self.after_start is not None:
                self.after_start(url, work)
            yield url, pid


def _venv(package: str, script: str) -> Callable[[Path], None]:
    def install(home: Path) -> None:
        if (home / "bin" / script).exists():
            return
        subprocess.run([sys.executable, "-m", "venv", str(home)], check=True)
        subprocess.run(
            [str(home / "bin/pip"), "install", "-q", "--disable-pip-version-check", package],
            check=True,
        )

    return install


# ---- aimock


AIMOCK = "1.43.0"


def _aimock_install(home: Path) -> None:
    package = home / "node_modules/@copilotkit/aimock/package.json"
    if package.exists() and json.loads(package.read_text())["version"] == AIMOCK:
        return
    subprocess.run(
        ["npm", "install", "--silent", "--prefix", str(home), f"@copilotkit/aimock@{AIMOCK}"],
        check=True,
    )


def _aimock_configure(work: Path) -> None:
    call = {"id": CALL_ID, "name": CALL_NAME, "arguments": CALL_ARGUMENTS}
    fixture = {
        "match": {"userMessage": TASK},
        "response": {"content": SAID, "toolCalls": [call]},
        "chunkSize": 1_000_000,  # each text and arguments in one delta (the default cuts at 20)
        "latency": 0,
    }
    (work / "aimock.json").write_text(json.dumps({"fixtures": [fixture]}))


def _aimock_argv(home: Path, work: Path, port: int) -> list[str]:
    cli = home / "node_modules/@copilotkit/aimock/dist/cli.js"
    # its request journal cannot be turned off: --journal-max 1 keeps it to one entry (0 means
    # unbounded); -h is the host, not help
    return [
        "node", str(cli), "-h", "127.0.0.1", "-p", str(port), "-f", str(work / "aimock.json"),
        "--journal-max", "1",
    ]  # fmt: skip


# ---- llm-mock-api


def _llm_mock_api_configure(work: Path) -> None:
    reply = {"text": SAID, "tools": [{"name": CALL_NAME, "args": json.loads(CALL_ARGUMENTS)}]}
    (work / "llm-mock-api.json").write_text(
        json.dumps({"rules": [{"when": TASK, "reply": reply}], "fallback": reply})
    )


def _llm_mock_api_argv(home: Path, work: Path, port: int) -> list[str]:
    rules = str(work / "llm-mock-api.json")
    # -l 0: no delay between events (default 200 ms); -c 0: the text whole (default 10 chars)
    return [
        str(home / "bin/llm-mock-api"), "start", "-H", "127.0.0.1", "-p", str(port),
        "-r", rules, "-l", "0", "-c", "0", "--log-level", "none",
    ]  # fmt: skip


# ---- llmock


def _llmock_configure(work: Path) -> None:
    (work / "llmock.json").write_text(
        json.dumps({"chaos": {"latency_ms": 0}, "stream": {"chunk_delay_ms": 0}})
    )
    reply = {
        "type": "reply",
        "text": SAID,
        "tool_calls": [{"name": CALL_NAME, "arguments": json.loads(CALL_ARGUMENTS)}],
        "finish_reason": "tool_calls",
        "times": None,  # every request, for as long as it runs
    }
    (work / "llmock-scenario.json").write_text(json.dumps({"behaviors": [reply]}))


def _llmock_argv(home: Path, work: Path, port: int) -> list[str]:
    return [
        str(home / "bin/llmock"), "serve", "--config", str(work / "llmock.json"),
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip


def _llmock_scenario(url: str, work: Path) -> None:
    r = httpx.post(url + "/_llmock/scenario", content=(work / "llmock-scenario.json").read_bytes())
    r.raise_for_status()


# ---- LiteLLM's proxy

LITELLM = "1.108.7"
LITELLM_HANDLER = f'''"""The benchmark's scripted turn as a LiteLLM CustomLLM: every call gets it."""
import litellm
from litellm import CustomLLM
from litellm.types.utils import (
    ChatCompletionMessageToolCall, Choices, Function, GenericStreamingChunk, Message,
    ModelResponse, Usage,
)


def _answer(model_response):
    call = ChatCompletionMessageToolCall(
        id={CALL_ID!r}, type="function",
        function=Function(name={CALL_NAME!r}, arguments={CALL_ARGUMENTS!r}),
    )
    message = Message(role="assistant", content={SAID!r}, tool_calls=[call])
    model_response.choices = [Choices(index=0, finish_reason="tool_calls", message=message)]
    model_response.usage = Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2)
    return model_response


def _chunk():
    call = {{"id": {CALL_ID!r}, "type": "function", "index": 0,
             "function": {{"name": {CALL_NAME!r}, "arguments": {CALL_ARGUMENTS!r}}}}}
    usage = {{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    return GenericStreamingChunk(text={SAID!r}, tool_use=call, is_finished=True,
                                 finish_reason="tool_calls", usage=usage, index=0)


class Turn(CustomLLM):
    def completion(self, *args, **kwargs):
        return _answer(kwargs["model_response"])

    async def acompletion(self, *args, **kwargs):
        return _answer(kwargs["model_response"])

    def streaming(self, *args, **kwargs):
        yield _chunk()

    async def astreaming(self, *args, **kwargs):
        yield _chunk()


turn = Turn()
'''
LITELLM_CONFIG = """model_list:
  - model_name: bench
    litellm_params:
      model: bench-turn/bench
litellm_settings:
  custom_provider_map:
    - provider: bench-turn
      custom_handler: bench_turn.turn
  telemetry: false
  set_verbose: false
general_settings:
  disable_spend_logs: true
  disable_error_logs: true
"""
# uvicorn's access log off: one line per request would be work the others do not do
LITELLM_LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "loggers": {"uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False}},
}
LITELLM_KEY = "sk-bench-0123456789abcdef"  # it refuses to start without a master key


def _litellm_configure(work: Path) -> None:
    (work / "bench_turn.py").write_text(LITELLM_HANDLER)
    (work / "litellm.yaml").write_text(LITELLM_CONFIG)
    (work / "litellm-logging.json").write_text(json.dumps(LITELLM_LOGGING))


def _litellm_argv(home: Path, work: Path, port: int) -> list[str]:
    return [
        str(home / "bin/litellm"), "--config", str(work / "litellm.yaml"),
        "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1",
        "--log_config", str(work / "litellm-logging.json"),
    ]  # fmt: skip


PEERS = (
    Peer(
        "aimock",
        AIMOCK,
        "Node.js 20, node:http",
        {"chat": "", "responses": "", "anthropic": "", "gemini": ""},
        _aimock_install,
        _aimock_configure,
        _aimock_argv,
        ready="/ready",
    ),
    Peer(
        "llm-mock-api",
        "0.1.2",
        "Python, FastAPI under uvicorn (uvloop, httptools)",
        {"chat": "", "responses": "", "anthropic": ""},
        _venv("llm-mock-api==0.1.2", "llm-mock-api"),
        _llm_mock_api_configure,
        _llm_mock_api_argv,
        ready="/",
    ),
    Peer(
        "llmock",
        "0.2.2",
        "Python, FastAPI under uvicorn (uvloop, httptools), handlers in a thread pool",
        {"chat": "", "responses": "", "anthropic": "/anthropic", "gemini": "/gemini"},
        _venv("llmock==0.2.2", "llmock"),
        _llmock_configure,
        _llmock_argv,
        after_start=_llmock_scenario,
    ),
    Peer(
        "litellm",
        LITELLM,
        "Python, LiteLLM's proxy (FastAPI under uvicorn), a CustomLLM handler",
        {"chat": "", "responses": "", "anthropic": ""},
        _venv(f"litellm[proxy]=={LITELLM}", "litellm"),
        _litellm_configure,
        _litellm_argv,
        ready="/health/liveliness",
        env={
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no download of the price list,
            "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",  # nor of Anthropic's header table
            "LITELLM_LOG": "ERROR",
            "LITELLM_MASTER_KEY": LITELLM_KEY,
        },
        headers={"authorization": f"Bearer {LITELLM_KEY}", "x-api-key": LITELLM_KEY},
    ),
)
BY_NAME = {peer.name: peer for peer in PEERS}
