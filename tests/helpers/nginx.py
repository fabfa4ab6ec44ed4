"""A real nginx in front of the proxy, configured with the `server` block taken from the docs.

The listening socket is made here and handed to nginx (its NGINX variable names inherited
sockets, as for a binary upgrade), so it is listening before nginx starts: nothing polls. The
configuration is tested first (nginx -t), so a block nginx refuses fails at once.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import ROOT

CONF = """worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
{block}
}}
"""


def documented_block(page: str = "operations.md") -> str:
    """The ```nginx block of a docs page, as written."""
    text = (ROOT / "docs" / page).read_text()
    found = re.search(r"```nginx\n(.*?)```", text, re.S)
    assert found is not None, f"docs/{page} has no nginx block"
    return found.group(1)


def nginx_binary() -> str:
    binary = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if binary is None:
        if os.environ.get("REPLAY_PROXY_REQUIRE_NGINX"):
            pytest.fail("nginx is required (REPLAY_PROXY_REQUIRE_NGINX) but not installed")
        pytest.skip("nginx is not installed (apt-get install nginx, or run .ci/run)")
    return binary


@contextmanager
def nginx_in_front(block: str, proxy_port: int) -> Iterator[str]:
    """nginx serving the `server` block on a free loopback port (its `listen` line's), with its
    proxy_pass pointed at the proxy's port; yields its root URL."""
    binary = nginx_binary()
    block = block.replace("http://127.0.0.1:8080", f"http://127.0.0.1:{proxy_port}")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as folder:
        conf = Path(folder) / "nginx.conf"
        block = re.sub(r"listen [^;]*;", f"listen 127.0.0.1:{port};", block, count=1)
        indented = "\n".join("    " + line for line in block.splitlines())
        conf.write_text(CONF.format(folder=folder, block=indented))
        tested = subprocess.run(
            [binary, "-t", "-q", "-c", str(conf), "-p", folder], capture_output=True, text=True
        )
        assert tested.returncode == 0, f"nginx refuses the block: {tested.stderr}"
        fd = sock.fileno()
        process = subprocess.Popen(
            [binary, "-c", str(conf), "-p", folder, "-g", "daemon off;"],
            env={**os.environ, "NGINX": f"{fd};"},
            pass_fds=(fd,),
            start_new_session=True,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            _, errors = process.communicate(timeout=30)
            sock.close()
            assert "[emerg]" not in errors, errors
