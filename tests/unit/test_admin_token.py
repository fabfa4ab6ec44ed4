"""The admin token: what may be one, the status page's signed cookie, and the file a token made
at start is written to."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from proxy import admin_token
from proxy.config import Settings


@pytest.mark.parametrize(
    "token",
    [
        "change-me",  # the old compose default
        "REPLACE-ME-with-a-long-random-token",  # the Kubernetes Secret's placeholder
        "your-token-goes-here-0123456789",
        "example-admin-token-abcdefgh",
        "t0k",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",  # long, but a repeated few
        "abcabcabcabcabcabcabc",
        "a token with spaces in it 123456",
    ],
)
def test_placeholders_and_guessable_tokens_are_refused(token: str) -> None:
    assert admin_token.weak_token(token) is not None
    with pytest.raises(ValueError, match="admin token"):
        Settings(admin_token=token)


def test_a_real_token_is_taken_and_an_empty_one_means_none() -> None:
    for _ in range(200):  # what `serve` makes always passes
        assert admin_token.weak_token(admin_token.make()) is None
    made = admin_token.make()
    assert Settings(admin_token=made).admin_token is not None
    assert Settings(admin_token="").admin_token is None  # REPLAY_PROXY_ADMIN_TOKEN= (compose)


def test_the_sign_in_cookie_holds_a_signature_not_the_token() -> None:
    token = admin_token.make()
    cookie = admin_token.sign_in(token, now=1000.0)
    assert token not in cookie
    assert admin_token.signed_in(token, cookie, now=1000.0 + admin_token.SIGN_IN_SECONDS - 1)
    assert not admin_token.signed_in(token, cookie, now=1000.0 + admin_token.SIGN_IN_SECONDS)
    assert not admin_token.signed_in(admin_token.make(), cookie, now=1000.0)  # another token
    expires, _, signature = cookie.partition(".")
    later = str(int(expires) + 10**6)
    assert not admin_token.signed_in(token, f"{later}.{signature}", now=1000.0)  # moved expiry
    for forged in ("", ".", "x.y", f"{expires}.", "9" * 40 + ".ab"):
        assert not admin_token.signed_in(token, forged, now=1000.0)


def test_the_token_file_is_readable_by_its_user_only(tmp_path: Path) -> None:
    path = tmp_path / "run" / "admin-token"
    path.parent.mkdir()
    path.write_text("old")
    path.chmod(0o644)  # an existing file with a loose mode is tightened before it is written
    token = admin_token.make()
    admin_token.write_file(path, token)
    assert path.read_text().strip() == token
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    admin_token.remove_file(path, "another proxy's token")
    assert path.exists()  # not ours any more: left alone
    admin_token.remove_file(path, token)
    assert not path.exists()


def test_a_link_is_not_followed_when_the_token_is_written(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    link = tmp_path / "admin-token"
    link.symlink_to(target)
    with pytest.raises(OSError):
        admin_token.write_file(link, admin_token.make())
    assert target.read_text() == "keep"


def test_the_default_file_is_in_a_folder_of_this_user_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    path = admin_token.default_file(8080)
    assert path == tmp_path / "replay-proxy" / "admin-token-8080"
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)  # a folder others may write to is passed over
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(shared))
    (shared / "replay-proxy").mkdir(mode=0o777)
    os.chmod(shared / "replay-proxy", 0o777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert admin_token.default_file(9) == tmp_path / "cache" / "replay-proxy" / "admin-token-9"
