"""Settings: every flag of `replay-proxy serve`, also settable as REPLAY_PROXY_<FLAG_IN_CAPS>.

List settings take a comma-separated value in the environment
(REPLAY_PROXY_TRAJECTORY=a.json,b.json). No module-level instance: the CLI builds one.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
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
from proxy.replay.normalize import compile_masks
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


ENV_PREFIX = "REPLAY_PROXY_"
# REPLAY_PROXY_* names that are not settings: the test suite's, the benchmark's and the compose
# files' own, so that serve does not warn about them
NOT_SETTINGS = frozenset(
    {"HOST_PORT", "PORT_A", "PORT_B", "TEST_REDIS_URL", "UPDATE_GOLDEN", "SOAK_SECONDS"}
    | {"HARNESS_CACHE", "PEER_CACHE"}
)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    upstream: str | None = None  # may hold {session} and {trajectory} in its path and query
    upstream_header: Annotated[tuple[str, ...], NoDecode] = ()  # "Name: value", with fields
    upstream_api_key: SecretStr | None = None
    trajectory: Annotated[tuple[Path, ...], NoDecode] = ()
    trajectory_dir: Path | None = None
    session_header: Annotated[tuple[str, ...], NoDecode] = DEFAULT_SESSION_HEADERS
    subagent_header: Annotated[tuple[str, ...], NoDecode] = DEFAULT_SUBAGENT_HEADERS
    bind_on_task: bool = False
    on_divergence: DivergencePolicy = DivergencePolicy.ERROR
    on_observation_divergence: ObservationPolicy = ObservationPolicy.WARN
    after_script: AfterScript = AfterScript.LIVE
    # a session whose restore verdict is not "restored" is refused its hand-off (proxy.replay.restore)
    require_restored: bool = False
    # nothing of a session goes upstream before its hand-off: side calls and subagents are
    # answered from the recording, or refused (docs/checkpoints.md)
    fence: bool = False
    # the first live call of a resumed session carries the recorded prefix's token ids
    # (required_prefix_token_ids), for a token-in upstream (proxy.replay.tokens)
    handoff_tokens: bool = False
    mode: Mode = Mode.RESUME
    replay_turns: int | None = Field(default=None, ge=0)  # every session branches at turn K
    mask: Annotated[tuple[str, ...], NoDecode] = ()
    mask_file: Annotated[tuple[Path, ...], NoDecode] = ()  # one pattern per line, # comments
    presets: bool = True  # the recognised harness's masks (proxy.replay.presets) apply in strict
    fail_on: FailOn = FailOn.ANY  # changed: a volatile divergence is noted and served
    fault: Annotated[tuple[str, ...], NoDecode] = ()  # TURN:KIND[:SECONDS], every session
    record_dir: Path | None = None
    dump_dir: Path | None = None
    # the admin API's Bearer token; without one, `serve` makes one and writes it to
    # admin_token_file, unless insecure_admin serves the admin API without any (proxy.trust)
    admin_token: SecretStr | None = None
    admin_token_file: Path | None = None  # where a token `serve` made is written (mode 0600)
    insecure_admin: bool = False  # the admin API without a token: anyone who reaches the port
    # requests may choose or branch their session's script (x-replay-trajectory, /t/{name}/,
    # x-replay-turns) without the admin token in x-replay-token
    open_binding: bool = False
    # host names (besides IP addresses and localhost) the admin API answers without a token, and
    # pages a completion request may come from (proxy.guard); "*.corp" for a domain
    allowed_host: Annotated[tuple[str, ...], NoDecode] = ()
    session_ttl: float = Field(default=24 * 3600.0, ge=0)  # idle seconds; 0 keeps sessions
    log_level: LogLevel = LogLevel.INFO
    log_format: LogFormat = LogFormat.TEXT
    store: str = "memory://"
    workers: int = Field(default=1, ge=1, le=256)
    # limits and timeouts of the HTTP layers (flags too: serve --help lists them)
    max_body_bytes: int = Field(default=64 * 1024 * 1024, gt=0)  # a request's, and a recorded copy
    # trajectories loaded after start-up (admin scripts, files named by x-replay-trajectory),
    # kept parsed up to this many bytes of their files; the least recently used go first
    trajectory_cache_bytes: int = Field(default=256 * 1024 * 1024, gt=0)
    # a request body over this many bytes is read and decided in a worker process, never in the
    # one serving every connection (proxy.offload); 0 never hands one over
    offload_bytes: int = Field(default=4 * 1024 * 1024, ge=0)
    connect_timeout: float = Field(default=10.0, gt=0)
    read_timeout: float = Field(default=600.0, gt=0)  # between two reads of a long, thinking stream
    total_timeout: float | None = Field(default=None, gt=0)  # a whole answer; none by default
    # longer than clients keep idle connections (httpx: 5 s, aiohttp: 15 s), so that the server
    # never closes one just as a client sends on it; agents sit idle while their tools run
    keep_alive_timeout: float = Field(default=120.0, gt=0)
    shutdown_timeout: float = Field(default=30.0, ge=0)  # SIGTERM: how long answers may finish
    # the Responses API over a WebSocket (proxy.http.websocket); off: upgrades get 426, "use HTTP"
    websocket: bool = True
    websocket_idle_timeout: float = Field(default=900.0, gt=0)  # agents idle while tools run
    websocket_max_turns: int = Field(default=10_000, ge=1)  # then the client opens another
    # a client socket's live turns: over a socket of their own to the upstream, where it takes
    # one (new items only after the first), else over HTTP (proxy.upstream.socket)
    upstream_websocket: UpstreamSocket = UpstreamSocket.AUTO

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

    def rules(self) -> Rules:
        """What the decision is told: the policies, the masks, and in strict mode the strict
        comparison (made once per process that decides: the app, and each offload worker)."""
        masks = compile_masks(self.masks())
        # side and subagent requests are compared with recorded ones in every mode: in strict
        # mode always, in resume mode before a session's hand-off (proxy.http.recorded)
        recorded = StrictReplay(
            masks, presets=self.presets, cache_bytes=self.trajectory_cache_bytes
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
