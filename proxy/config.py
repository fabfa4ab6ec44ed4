"""Settings: every flag of `replay-proxy serve`, also settable as REPLAY_PROXY_<FLAG_IN_CAPS>.

List settings take a comma-separated value in the environment
(REPLAY_PROXY_TRAJECTORY=a.json,b.json). No module-level instance: the CLI builds one.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from proxy.admin_token import weak_token
from proxy.replay.engine import (
    AfterScript,
    DivergencePolicy,
    FailOn,
    Mode,
    ObservationPolicy,
    Rules,
)
from proxy.replay.faults import Fault, FaultError, parse_flag
from proxy.replay.normalize import Fields, compile_masks
from proxy.replay.strict import StrictReplay
from proxy.upstream.template import check_url, parse_header

DEFAULT_SESSION_HEADERS = (
    "x-session-affinity",
    "x-session-id",
    "session-id",
    "x-litellm-session-id",
    "x-claude-code-session-id",
)
# each harness's own (proxy.lineage): opencode marks a subagent's calls with the parent's id;
# Claude Code 2.x sends its subagents' calls with the parent's session id and the subagent's own
# id in x-claude-code-agent-id (and a nested one's parent in x-claude-code-parent-agent-id);
# Codex sends a child's calls with the root's session-id, its kind in x-openai-subagent and, for
# a spawned agent, its parent's thread in x-codex-parent-thread-id
DEFAULT_SUBAGENT_HEADERS = (
    "x-parent-session-id",
    "x-claude-code-agent-id",
    "x-claude-code-parent-agent-id",
    "x-openai-subagent",
    "x-codex-parent-thread-id",
)


class LogFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


class UpstreamSocket(StrEnum):
    """How a live turn that came over a client's WebSocket goes upstream."""

    AUTO = "auto"  # a socket, until the upstream refuses one; then HTTP SSE for that upstream
    ALWAYS = "always"  # a socket or nothing: a refused upgrade is the turn's error
    NEVER = "never"  # HTTP SSE, the whole conversation each turn


class LogLevel(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


def read_mask_file(path: Path) -> tuple[str, ...]:
    """A mask file (`replay-proxy masks suggest` writes one): a pattern per line; blank lines and
    lines starting with # are left out."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read the mask file {str(path)!r}: {exc}") from None
    return tuple(
        line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    )


def _compiled(patterns: tuple[str, ...]) -> tuple[str, ...]:
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{pattern!r} is not a valid regular expression: {exc}") from None
    return patterns


@dataclass(frozen=True, slots=True)
class Flag:
    """What a setting says of itself, beside its type and default: its `serve --help` line and
    its row of the configuration page, both made from it (proxy.flags), and nowhere else."""

    help: str | None  # serve --help
    doc: str  # the configuration page's meaning column (Markdown, links relative to docs/)
    metavar: str | None = None
    default: str | None = None  # the page's default column, where the value alone says too little
    group: str | None = None  # the --help group it is listed under


LIMITS = "limits and timeouts"
SOCKETS = "the Responses API over a WebSocket"


ENV_PREFIX = "REPLAY_PROXY_"
# REPLAY_PROXY_* names that are not settings: the test suite's, the benchmark's and the compose
# files' own, so that serve does not warn about them
NOT_SETTINGS = frozenset(
    {"HOST_PORT", "PORT_A", "PORT_B", "TEST_REDIS_URL", "UPDATE_GOLDEN", "SOAK_SECONDS"}
    | {"HARNESS_CACHE", "PEER_CACHE"}
)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    host: Annotated[str, Flag("address to bind (default 127.0.0.1)", "address to bind")] = (
        "127.0.0.1"
    )
    port: Annotated[
        int,
        Flag(
            "port to bind, 0 for any free one (default 8080)",
            "port to bind (`0`: any free port; the bound URL is printed)",
        ),
    ] = Field(default=8080, ge=0, le=65535)
    # may hold {session} and {trajectory} in its path and query
    upstream: Annotated[
        str | None,
        Flag(
            "the real LLM's base URL, including /v1; {session} and {trajectory} in its path or query are filled in per session (a gateway that keys rollouts by id)",
            "the real LLM's base URL, including `/v1` (`http://` or `https://`), or the root of an API whose paths keep their version: Gemini's (`https://generativelanguage.googleapis.com`), Vertex AI's (`https://us-east5-aiplatform.googleapis.com`), Bedrock's (`https://bedrock-runtime.us-east-1.amazonaws.com`), each request in its own API's path ([Claude Code](harnesses/claude-code.md#through-google-vertex-ai-or-amazon-bedrock)); without it, unscripted requests get a 503. `{session}` and `{trajectory}` in its path or query are filled in per session ([RL pipelines](rl-pipelines.md#an-upstream-per-session))",
            metavar="URL",
        ),
    ] = None
    # "Name: value", with fields
    upstream_header: Annotated[
        tuple[str, ...],
        NoDecode,
        Flag(
            "a header sent upstream with every forwarded request, replacing the client's; {session} and {trajectory} are filled in (repeatable)",
            "a header sent with every forwarded request, replacing the client's of that name; `{session}`, `{trajectory}`, and on a resumed session's live calls `{handoff_turn}` and `{restore}` ([Checkpoints](checkpoints.md)), are filled in (repeatable; env: one per line)",
            metavar="'NAME: VALUE'",
        ),
    ] = ()
    upstream_api_key: Annotated[
        SecretStr | None,
        Flag(
            "sent upstream instead of the client's credentials (default: pass the client's on)",
            "sent upstream instead of the client's credentials (without it, the client's are passed on)",
            metavar="KEY",
        ),
    ] = None
    trajectory: Annotated[
        tuple[Path, ...],
        NoDecode,
        Flag("a trajectory (repeatable)", "a trajectory to serve (repeatable)", metavar="FILE"),
    ] = ()
    trajectory_dir: Annotated[
        Path | None,
        Flag(
            "NAME.json / NAME.jsonl trajectories",
            "`NAME.json`/`NAME.jsonl` files, chosen by `x-replay-trajectory: NAME` or by task",
            metavar="DIR",
        ),
    ] = None
    session_header: Annotated[
        tuple[str, ...],
        NoDecode,
        Flag(
            "session header, first present wins (repeatable; default x-session-affinity, x-session-id, session-id, x-litellm-session-id, x-claude-code-session-id)",
            "session header, first present wins (repeatable; replaces the default list)",
            metavar="NAME",
        ),
    ] = DEFAULT_SESSION_HEADERS
    subagent_header: Annotated[
        tuple[str, ...],
        NoDecode,
        Flag(
            "marks subagent calls, any one present (repeatable; default x-parent-session-id, x-claude-code-agent-id, x-claude-code-parent-agent-id, x-openai-subagent, x-codex-parent-thread-id)",
            "marks subagent calls, any one present (repeatable; comma-separated in the variable)",
            metavar="NAME",
            default="`x-parent-session-id`, `x-claude-code-agent-id`, `x-claude-code-parent-agent-id`, `x-openai-subagent`, `x-codex-parent-thread-id` ([Replay rules](replay.md#the-steps))",
        ),
    ] = DEFAULT_SUBAGENT_HEADERS
    bind_on_task: Annotated[
        bool,
        Flag(
            "bind a session only to a trajectory with its task, never to an unclaimed one",
            "bind a session only to a trajectory with its task, never to an unclaimed one",
        ),
    ] = False
    on_divergence: Annotated[
        DivergencePolicy,
        Flag(
            "when the history disagrees with the script: answer an error, or go live (default error)",
            "what a divergent request gets: `error` (an error naming the first difference) or `live` (it and the rest of the session go upstream)",
        ),
    ] = DivergencePolicy.ERROR
    mode: Annotated[
        Mode,
        Flag(
            "resume: replay, then go live (default); strict: replay only, compare every request",
            "`resume`: replay, then go live; `strict`: no upstream; every request compared with the recording",
        ),
    ] = Mode.RESUME
    # every session branches at turn K
    replay_turns: Annotated[
        int | None,
        Flag(
            "branch every session: replay only the first K scripted turns, then go live (a session's x-replay-turns header or admin PUT ?turns=K overrides it)",
            "every session [branches](rounds.md#branching-replay-the-first-k-turns-then-go-live) at turn K: it replays the first K turns, then goes live; a session's `x-replay-turns` header or admin `?turns=K` overrides it; refused with `--mode strict`",
            metavar="K",
            default="(whole script)",
        ),
    ] = Field(default=None, ge=0)
    mask: Annotated[
        tuple[str, ...],
        NoDecode,
        Flag(
            "text that may differ between runs (dates, paths); masked before comparing (repeatable)",
            "text that may differ between runs (repeatable; env: one per line)",
            metavar="REGEX",
        ),
    ] = ()
    # one pattern per line, # comments
    mask_file: Annotated[
        tuple[Path, ...],
        NoDecode,
        Flag(
            "masks, one pattern per line (# comments), as masks suggest writes (repeatable)",
            "masks, one pattern per line, `#` comments, as `masks suggest -o` writes them (repeatable; comma-separated in the variable)",
            metavar="FILE",
        ),
    ] = ()
    # the recognised harness's masks (proxy.replay.presets) apply in strict
    presets: Annotated[
        bool,
        Flag(
            "do not apply the recognised harness's preset masks",
            "do not apply the recognised harness's [preset](record-strict-diff.md#harness-presets) in strict mode",
            default="presets on",
        ),
    ] = True
    # changed: a volatile divergence is noted and served
    fail_on: Annotated[
        FailOn,
        Flag(
            "any: every divergence is an error (default); changed: a volatile one (only dates, temporary paths, ids differ) is served and counted, only a changed one is an error",
            "`any`: every divergence is one; `changed`: a [volatile](record-strict-diff.md#verdicts-volatile-or-changed) one is served from the recording and counted, only a changed one fails",
        ),
    ] = FailOn.ANY
    on_observation_divergence: Annotated[
        ObservationPolicy,
        Flag(
            "when a tool result (in a text-based script, an observation) differs from the recorded one (default warn)",
            "when a tool result (or, in a text-based script, an observation) differs from the recorded one, after `--mask` and the recognised harness's preset masks: `warn`, `live` or `error`",
        ),
    ] = ObservationPolicy.WARN
    # a session whose restore verdict is not "restored" is refused its hand-off (proxy.replay.restore)
    require_restored: Annotated[
        bool,
        Flag(
            "refuse a session's first live call unless every replayed tool result came back as recorded (its restore verdict is 'restored'); the session stays as it is",
            "refuse a session's hand-off (its first live call, 403 `session_not_restored`) unless its restore verdict is `restored`: every replayed tool result came back as recorded ([Checkpoints](checkpoints.md#the-restore-verdict))",
        ),
    ] = False
    # nothing of a session goes upstream before its hand-off: side calls and subagents are
    # answered from the recording, or refused (docs/checkpoints.md)
    fence: Annotated[
        bool,
        Flag(
            "nothing of a session goes upstream before its hand-off: side calls and subagent calls are answered from the recording, or refused with an error naming the call",
            "nothing of a session goes upstream before its hand-off: its side calls and subagent calls are answered from the recording where it holds them, else refused (403 `fenced_before_handoff`) naming the call ([Checkpoints](checkpoints.md#side-calls-before-the-cut-and-the-fence))",
        ),
    ] = False
    # the first live call of a resumed session carries the recorded prefix's token ids
    # (required_prefix_token_ids), for a token-in upstream (proxy.replay.tokens)
    handoff_tokens: Annotated[
        bool,
        Flag(
            "a restored session's first live Chat Completions call carries required_prefix_token_ids: the last replayed turn's recorded prompt and generation token ids, so a token-in upstream (NeMo RL's vLLM server) continues from exactly them",
            "a resumed session's first live Chat Completions call carries `required_prefix_token_ids`: the last replayed turn's recorded prompt and generation token ids, for an upstream that continues from a token prefix; only when the session's restore verdict is `restored` ([RL pipelines](rl-pipelines.md#the-token-exact-hand-off))",
        ),
    ] = False
    after_script: Annotated[
        AfterScript,
        Flag(
            "when the script is used up: go live (default) or stop with a final text turn",
            "when the script is used up: go live (`live`), or answer a final text turn (`stop`)",
        ),
    ] = AfterScript.LIVE
    # TURN:KIND[:SECONDS], every session
    fault: Annotated[
        tuple[str, ...],
        NoDecode,
        Flag(
            "inject a fault at a scripted turn of every session: KIND is 429, 500, 503 (an error SDKs retry; SECONDS: its retry-after, default 1), drop, stall:SECONDS or delay:SECONDS (repeatable; docs/resilience.md)",
            "inject a fault at scripted turn TURN of every session: `429`, `500`, `503` (SECONDS: the retry-after, default 1), `drop`, `stall:SECONDS`, `delay:SECONDS` (repeatable; comma-separated in the variable; [Testing harness resilience](resilience.md))",
            metavar="TURN:KIND[:SECONDS]",
        ),
    ] = ()
    record_dir: Annotated[
        Path | None,
        Flag(
            "record every exchange here",
            "record every exchange to `DIR/<session>.jsonl`",
            metavar="DIR",
        ),
    ] = None
    dump_dir: Annotated[
        Path | None,
        Flag(
            "dump live completions here", "write each live completion as a JSON file", metavar="DIR"
        ),
    ] = None
    store: Annotated[
        str,
        Flag(
            "session state: memory:// (default), sqlite:///state.db, redis://host:6379/0",
            "session state: `memory://`, `sqlite:///state.db`, `redis://host:6379/0`",
            metavar="URL",
        ),
    ] = "memory://"
    workers: Annotated[
        int,
        Flag(
            "worker processes (needs sqlite or redis)",
            "worker processes, 1 to 256 (more than one needs a SQLite or Redis store)",
            metavar="N",
        ),
    ] = Field(default=1, ge=1, le=256)
    # the admin API's Bearer token; without one, `serve` makes one and writes it to
    # admin_token_file, unless insecure_admin serves the admin API without any (proxy.trust)
    admin_token: Annotated[
        SecretStr | None,
        Flag(
            "Bearer token for /replay/* (and x-replay-token to choose a script by request); without it one is made at start and written to --admin-token-file",
            "Bearer token required by `/replay/*` and the status page, and, sent as `x-replay-token`, by a request that chooses or branches its script; at least 16 characters, no placeholder (`change-me`); without one (or empty), `serve` makes one and writes it to `--admin-token-file` ([Security](security.md#the-admin-token))",
            metavar="TOKEN",
            default="made at start",
        ),
    ] = None
    # where a token `serve` made is written (mode 0600)
    admin_token_file: Annotated[
        Path | None,
        Flag(
            "where the token made at start is written, readable by you only (default $XDG_RUNTIME_DIR/replay-proxy/admin-token-PORT, else ~/.cache/replay-proxy/...)",
            "where the token made at start is written, readable by you only; the start line names it, and it is taken away when the proxy stops",
            metavar="FILE",
            default="`$XDG_RUNTIME_DIR/replay-proxy/admin-token-PORT`, else `~/.cache/replay-proxy/...`",
        ),
    ] = None
    # the admin API without a token: anyone who reaches the port
    insecure_admin: Annotated[
        bool,
        Flag(
            "serve the admin API without any token, to anyone who can reach the port",
            "serve the admin API without any token, to anyone who can reach the port (a request through a reverse proxy is still refused)",
        ),
    ] = False
    # requests may choose or branch their session's script (x-replay-trajectory, /t/{name}/,
    # x-replay-turns) without the admin token in x-replay-token
    open_binding: Annotated[
        bool,
        Flag(
            "let any request choose or branch its session's script (x-replay-trajectory, /s/{session}/t/{name}/, x-replay-turns, /k/{K}/) without the admin token in x-replay-token",
            "let any request choose or branch its session's script (`x-replay-trajectory`, `/s/{session}/t/{name}/`, `x-replay-turns`, `/k/{K}/`) without the admin token in `x-replay-token`, for runners that can set only a base URL ([Security](security.md#choosing-a-script))",
        ),
    ] = False
    # host names (besides IP addresses and localhost) the admin API answers without a token, and
    # pages a completion request may come from (proxy.guard); "*.corp" for a domain
    allowed_host: Annotated[
        tuple[str, ...],
        NoDecode,
        Flag(
            "a host name the admin API answers without a token, and that web pages calling the proxy may come from, besides IP addresses and localhost ('*.corp' for a domain; repeatable; docs/security.md)",
            "a host name (no port) clients may address the proxy by, besides IP addresses, `localhost` and `*.localhost`: checked on the admin API without a token, and on every request with `--upstream-api-key`; also a name web pages calling the proxy may come from, besides loopback and `localhost` (`*.corp` for a domain, `*` for any; repeatable; [Security](security.md#web-pages-the-user-has-open))",
            metavar="NAME",
        ),
    ] = ()
    # idle seconds; 0 keeps sessions
    session_ttl: Annotated[
        float,
        Flag(
            "forget a session after this many seconds without a request (default 86400: 24 h; 0 keeps sessions for as long as the store does)",
            "forget a session (its state, script and claims) once it has had no request for S seconds, in every store; `0` keeps sessions for as long as the store does ([Sessions and stores](sessions-and-stores.md#sessions-expire))",
            metavar="S",
            default="`86400` (24 h)",
        ),
    ] = Field(default=24 * 3600.0, ge=0)
    log_level: Annotated[LogLevel, Flag(None, "`debug`, `info`, `warning`, `error`")] = (
        LogLevel.INFO
    )
    log_format: Annotated[
        LogFormat,
        Flag("one JSON object per line with json", "`text`, or `json`: one JSON object per line"),
    ] = LogFormat.TEXT
    # limits and timeouts of the HTTP layers (flags too: serve --help lists them)
    # a request's, and a recorded copy
    max_body_bytes: Annotated[
        int,
        Flag(
            "largest request body, and largest answer copied for --record-dir/--dump-dir (default 67108864: 64 MiB)",
            "largest request body (413 beyond), and largest answer copied for `--record-dir`/`--dump-dir`",
            metavar="N",
            default="`67108864` (64 MiB)",
            group=LIMITS,
        ),
    ] = Field(default=64 * 1024 * 1024, gt=0)
    # trajectories loaded after start-up (admin scripts, files named by x-replay-trajectory),
    # kept parsed up to this many bytes of their files; the least recently used go first
    trajectory_cache_bytes: Annotated[
        int,
        Flag(
            "trajectories loaded after start-up (admin scripts, x-replay-trajectory files) kept parsed, in bytes of their files; the least recently used go first (default 268435456: 256 MiB)",
            "trajectories that come after start-up (admin scripts, files named by `x-replay-trajectory`) are kept parsed up to this many bytes of their files (a parsed one takes about four times its file); the least recently used go first, and are parsed again when asked for; the same bound holds strict mode's normal forms of recorded requests, and apart from them what each session's last compared step leaves for its next",
            metavar="N",
            default="`268435456` (256 MiB)",
            group=LIMITS,
        ),
    ] = Field(default=256 * 1024 * 1024, gt=0)
    # a request body over this many bytes is read and decided in a worker process, never in the
    # one serving every connection (proxy.offload); 0 never hands one over
    offload_bytes: Annotated[
        int,
        Flag(
            "a request body over N bytes is read and decided in a worker process, so that no single request holds up the others (default 4194304: 4 MiB; 0: never)",
            "a request body over N bytes is read and decided (and, in strict mode, compared) in a worker process, never in the one serving every connection, so that no single request holds the others up ([Security](security.md#bounded-work)); `0` never hands one over",
            metavar="N",
            default="`4194304` (4 MiB)",
            group=LIMITS,
        ),
    ] = Field(default=4 * 1024 * 1024, ge=0)
    connect_timeout: Annotated[
        float,
        Flag(
            "seconds to connect to the upstream (default 10)",
            "seconds to connect to the upstream",
            metavar="S",
            group=LIMITS,
        ),
    ] = Field(default=10.0, gt=0)
    # between two reads of a long, thinking stream
    read_timeout: Annotated[
        float,
        Flag(
            "seconds the upstream may stay silent, before or within its answer (default 600)",
            "seconds the upstream may stay silent, before or within its answer",
            metavar="S",
            group=LIMITS,
        ),
    ] = Field(default=600.0, gt=0)
    # a whole answer; none by default
    total_timeout: Annotated[
        float | None,
        Flag(
            "seconds for a whole upstream answer, stream included (default: no limit)",
            "seconds for a whole upstream answer, stream included",
            metavar="S",
            group=LIMITS,
        ),
    ] = Field(default=None, gt=0)
    # longer than clients keep idle connections (httpx: 5 s, aiohttp: 15 s), so that the server
    # never closes one just as a client sends on it; agents sit idle while their tools run
    keep_alive_timeout: Annotated[
        float,
        Flag(
            "seconds an idle client connection is kept open (default 120)",
            "seconds an idle client connection is kept (agents sit idle while tools run)",
            metavar="S",
            group=LIMITS,
        ),
    ] = Field(default=120.0, gt=0)
    # SIGTERM: how long answers may finish
    shutdown_timeout: Annotated[
        float,
        Flag(
            "on SIGTERM, seconds the answers in flight may take to finish (default 30)",
            "on SIGTERM, seconds the answers in flight may take to finish",
            metavar="S",
            group=LIMITS,
        ),
    ] = Field(default=30.0, ge=0)
    # the Responses API over a WebSocket (proxy.http.websocket); off: upgrades get 426, "use HTTP"
    websocket: Annotated[
        bool,
        Flag(
            'answer a WebSocket upgrade on /v1/responses with 426, which Codex and opencode read as "use HTTP" (default: WebSockets are served)',
            'answer a WebSocket upgrade on `/v1/responses` with 426, which Codex and opencode read as "use HTTP" ([Responses over a WebSocket](websockets.md))',
            default="WebSockets on",
            group=SOCKETS,
        ),
    ] = True
    # agents idle while tools run
    websocket_idle_timeout: Annotated[
        float,
        Flag(
            "close a socket with no frame for this many seconds (default 900)",
            "close a socket that sends no frame for S seconds (a harness idles on it while its tools run)",
            metavar="S",
            group=SOCKETS,
        ),
    ] = Field(default=900.0, gt=0)
    # then the client opens another
    websocket_max_turns: Annotated[
        int,
        Flag(
            "response.create frames one socket may send; then it is told to open another (default 10000)",
            "`response.create` frames one socket may send; the next gets `websocket_connection_limit_reached`, and the client opens another socket",
            metavar="N",
            group=SOCKETS,
        ),
    ] = Field(default=10_000, ge=1)
    # a client socket's live turns: over a socket of their own to the upstream, where it takes
    # one (new items only after the first), else over HTTP (proxy.upstream.socket)
    upstream_websocket: Annotated[
        UpstreamSocket,
        Flag(
            "how a socket's live turns go upstream: over a WebSocket of their own, sending only the new items after the first turn (always), over HTTP SSE with the whole conversation each turn (never), or a WebSocket until the upstream refuses the upgrade, then HTTP for that upstream (auto, the default)",
            "how a client socket's live turns go upstream: `auto` (a WebSocket, until the upstream refuses one; then HTTP SSE), `always` (a WebSocket or the turn's error), `never` (HTTP SSE) ([The upstream leg](#the-upstream-leg))",
            group=SOCKETS,
        ),
    ] = UpstreamSocket.AUTO

    def socket_server(self) -> dict[str, Any]:
        """uvicorn's WebSocket options: a frame is a request body, and bounded as one."""
        return {"ws": "websockets-sansio", "ws_max_size": self.max_body_bytes}

    @field_validator(
        "trajectory",
        "session_header",
        "subagent_header",
        "fault",
        "allowed_host",
        "mask_file",
        mode="before",
    )
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("allowed_host")
    @classmethod
    def _host_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            bare = name.removeprefix("*.") if name != "*" else "host"
            if not bare or any(c in bare for c in ":/*@[] "):
                raise ValueError(
                    f"{name!r} is not a host name: give a name without a port ('proxy', "
                    "'replay.example.internal'), '*.example.internal' for a domain, or '*'"
                )
        return value

    @field_validator("admin_token", mode="before")
    @classmethod
    def _unset_if_empty(cls, value: Any) -> Any:
        # REPLAY_PROXY_ADMIN_TOKEN= (a compose file's ${VAR:-}) means "not set": one is made
        return None if value == "" else value

    @field_validator("admin_token")
    @classmethod
    def _a_real_secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            problem = weak_token(value.get_secret_value())
            if problem is not None:
                raise ValueError(problem)
        return value

    @field_validator("mask", mode="before")
    @classmethod
    def _one_per_line(cls, value: Any) -> Any:
        # a regex may hold commas, so the environment variable takes one pattern per line
        if isinstance(value, str):
            return tuple(line for line in value.splitlines() if line)
        return value

    @field_validator("mask")
    @classmethod
    def _compiles(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _compiled(value)

    @field_validator("mask_file")
    @classmethod
    def _mask_files(cls, value: tuple[Path, ...]) -> tuple[Path, ...]:
        for path in value:
            try:
                _compiled(read_mask_file(path))
            except ValueError as exc:
                raise ValueError(f"{path}: {exc}") from None
        return value

    def masks(self) -> tuple[str, ...]:
        """--mask patterns, then those of each --mask-file."""
        return (*self.mask, *(p for path in self.mask_file for p in read_mask_file(path)))

    def rules(self, fields: Fields) -> Rules:
        """What the decision is told: the policies, the masks, and in strict mode the strict
        comparison (made once per process that decides: the app, and each offload worker).
        `fields`: the served APIs' id and dropped fields (proxy.apis.fields_of)."""
        masks = compile_masks(self.masks())
        # side and subagent requests are compared with recorded ones in every mode: in strict
        # mode always, in resume mode before a session's hand-off (proxy.http.recorded)
        recorded = StrictReplay(
            masks, fields=fields, presets=self.presets, cache_bytes=self.trajectory_cache_bytes
        )
        strict = recorded if self.mode is Mode.STRICT else None
        return Rules(
            on_divergence=self.on_divergence,
            on_observation=self.on_observation_divergence,
            after_script=self.after_script,
            strict=strict,
            recorded=recorded,
            masks=masks,
            fail_on=self.fail_on,
            fields=fields,
        )

    @field_validator("fault")
    @classmethod
    def _faults(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for spec in value:
            try:
                parse_flag(spec)
            except FaultError as exc:
                raise ValueError(str(exc)) from None
        return value

    def faults(self) -> tuple[Fault, ...]:
        """The --fault plan, parsed."""
        return tuple(parse_flag(spec) for spec in self.fault)

    @field_validator("session_header")
    @classmethod
    def _lower(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("at least one session header is needed")
        return tuple(h.lower() for h in value)

    @field_validator("subagent_header")
    @classmethod
    def _lower_all(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(h.lower() for h in value)  # an empty list: no call is a subagent's

    @field_validator("upstream")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http:// or https:// URL")
        check_url(value)
        return value.rstrip("/")

    @field_validator("upstream_header", mode="before")
    @classmethod
    def _header_lines(cls, value: Any) -> Any:
        # a header value may hold commas: the environment variable takes one per line
        if isinstance(value, str):
            return tuple(line for line in value.splitlines() if line.strip())
        return value

    @field_validator("upstream_header")
    @classmethod
    def _headers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for spec in value:
            parse_header(spec)
        return value

    @model_validator(mode="after")
    def _branching_goes_live(self) -> Settings:
        if self.replay_turns is not None and self.mode is Mode.STRICT:
            raise ValueError(
                "--replay-turns needs --mode resume: strict replay never goes live, so there is "
                "nothing to branch into after turn K"
            )
        return self

    @model_validator(mode="after")
    def _shared_store_for_workers(self) -> Settings:
        if self.workers > 1 and self.store.startswith("memory"):
            raise ValueError(
                f"--workers {self.workers} needs a store the workers share: memory:// lives in one "
                "process; use --store sqlite:///state.db (one host) or redis://host:6379/0"
            )
        return self

    def worker_env(self) -> str:
        """These settings, secrets included, for worker processes to rebuild them from."""
        data = self.model_dump(mode="json", exclude_defaults=True)
        for name in ("upstream_api_key", "admin_token"):
            secret = getattr(self, name)
            if secret is not None:
                data[name] = secret.get_secret_value()
        return json.dumps(data)


def unknown_variables(environ: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """REPLAY_PROXY_* variables that name no setting (a misspelling is otherwise ignored without
    a word), each with the setting it was probably meant for."""
    fields = [name.upper() for name in Settings.model_fields]
    found = []
    for variable in sorted(environ):
        name = variable.removeprefix(ENV_PREFIX)
        if name == variable or name in fields or name in NOT_SETTINGS:
            continue
        if name.startswith("REQUIRE_"):  # the test suite's switches (REQUIRE_REDIS, ...)
            continue
        near = difflib.get_close_matches(name, fields, n=1, cutoff=0.75)
        found.append((variable, ENV_PREFIX + near[0] if near else None))
    return found
