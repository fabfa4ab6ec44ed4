"""The version is written once, in proxy/__init__.py: the package metadata, `--version` and the
OpenAPI document all read it from there."""

from __future__ import annotations

import tomllib
from importlib.metadata import version

import proxy
from tests.conftest import ROOT


def test_the_version_has_one_source() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
    assert version("replay-proxy") == proxy.__version__


def test_the_openapi_document_carries_it() -> None:
    from proxy.app import create_app
    from proxy.config import Settings

    app = create_app(Settings())
    assert app.api.openapi()["info"]["version"] == proxy.__version__
