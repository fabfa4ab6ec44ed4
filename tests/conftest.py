from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from proxy.app import create_app
from proxy.config import Settings
from tests.servers import FakeUpstream, running

ROOT = Path(__file__).parent.parent


@pytest.fixture
def upstream() -> Iterator[tuple[FakeUpstream, str]]:
    """A fake LLM on a free port: (the fake, its base URL including /v1)."""
    fake = FakeUpstream()
    with running(fake.app) as url:
        yield fake, url + "/v1"


ProxyFactory = Callable[..., AbstractContextManager[str]]


@pytest.fixture
def proxy() -> ProxyFactory:
    """proxy(**settings) -> a context manager running the proxy; yields its base URL with /v1."""

    @contextmanager
    def start(**settings: Any) -> Iterator[str]:
        app = create_app(Settings(**settings))
        with running(app) as url:
            yield url + "/v1"

    return start


@pytest.fixture
def write_trajectory(tmp_path: Path) -> Callable[..., Path]:
    def write(messages: Any, name: str = "run", folder: Path | None = None) -> Path:
        path = (folder or tmp_path) / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(messages))
        return path

    return write
