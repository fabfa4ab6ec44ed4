"""Settings: every flag of `replay-proxy serve`, also settable as REPLAY_PROXY_<FLAG_IN_CAPS>.

List settings take a comma-separated value in the environment
(REPLAY_PROXY_TRAJECTORY=a.json,b.json). No module-level instance: the CLI builds one.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from proxy.engine import DivergencePolicy

DEFAULT_SESSION_HEADERS = (
    "x-session-affinity",
    "x-session-id",
    "session-id",
    "x-litellm-session-id",
    "x-claude-code-session-id",
)


class LogLevel(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="REPLAY_PROXY_", extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    upstream: str | None = None
    upstream_api_key: SecretStr | None = None
    trajectory: Annotated[tuple[Path, ...], NoDecode] = ()
    trajectory_dir: Path | None = None
    session_header: Annotated[tuple[str, ...], NoDecode] = DEFAULT_SESSION_HEADERS
    subagent_header: str = "x-parent-session-id"
    bind_on_task: bool = False
    on_divergence: DivergencePolicy = DivergencePolicy.ERROR
    admin_token: SecretStr | None = None
    log_level: LogLevel = LogLevel.INFO
    store: str = "memory://"
    max_body_bytes: int = Field(64 * 1024 * 1024, gt=0)
    connect_timeout: float = Field(10.0, gt=0)
    read_timeout: float = Field(600.0, gt=0)  # between two bytes of a long, thinking stream

    @field_validator("trajectory", "session_header", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("session_header")
    @classmethod
    def _lower(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("at least one session header is needed")
        return tuple(h.lower() for h in value)

    @field_validator("subagent_header")
    @classmethod
    def _lower_one(cls, value: str) -> str:
        return value.lower()

    @field_validator("upstream")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http:// or https:// URL")
        return value.rstrip("/")
