"""What ``jetyard login`` keeps and how the user commands find their credentials
(``jetyard.sdk.config``): the file readable by its owner alone in a directory only they can
enter, under ``$XDG_CONFIG_HOME``; no password in it; options, then the environment, then the
file; the file's credentials never sent to another endpoint; an expired login said so."""

from __future__ import annotations

import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jetyard.sdk.config import (
    ConfigError,
    Credentials,
    config_path,
    forget,
    load,
    resolve,
    save,
    token_expiry,
)

GW = "http://gw.test:8080"


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config home and a stack registry of this test's own, and no JETYARD_* keypair."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "runtime"))
    for name in ("JETYARD_ENDPOINT", "JETYARD_ACCESS_KEY", "JETYARD_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_file_is_the_owners_alone_under_xdg_config_home(isolated: Path) -> None:
    where = config_path()
    assert where == isolated / "config" / "jetyard" / "config.toml"
    where.parent.mkdir(parents=True, mode=0o755)  # made by something else, too open
    where.parent.chmod(0o755)
    expires = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    save(Credentials(GW, token="tok-123", token_expires_at=expires, email="a@b.org"))
    assert _mode(where) == 0o600
    assert _mode(where.parent) == 0o700
    assert load() == Credentials(
        GW, token="tok-123", token_expires_at=expires, email="a@b.org", source=str(where)
    )
    save(Credentials(GW, "AK", 'S"K\\'))  # replaced whole, quotes and backslashes kept
    kept = load()
    assert kept is not None and (kept.access_key, kept.secret_key, kept.token) == (
        "AK",
        'S"K\\',
        None,
    )
    assert _mode(where) == 0o600
    assert [p.name for p in where.parent.iterdir()] == ["config.toml"]  # no partial file left
    assert forget() and not where.exists() and not forget()


def test_options_then_environment_then_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    save(Credentials(GW, token="tok", token_expires_at=token_expiry(3600)))
    assert resolve().token == "tok" and resolve().endpoint == GW
    monkeypatch.setenv("JETYARD_ACCESS_KEY", "ENVAK")
    monkeypatch.setenv("JETYARD_SECRET_KEY", "ENVSK")
    from_env = resolve()
    assert (from_env.endpoint, from_env.access_key, from_env.token) == (GW, "ENVAK", None)
    assert resolve(access_key="OPT", secret_key="OS").access_key == "OPT"
    monkeypatch.setenv("JETYARD_ENDPOINT", "http://other:1")
    assert resolve().endpoint == "http://other:1"
    monkeypatch.delenv("JETYARD_SECRET_KEY")
    with pytest.raises(ConfigError, match="both its access key and its secret key"):
        resolve()


def test_the_files_credentials_never_go_to_another_endpoint() -> None:
    save(Credentials(GW, "AK", "SK"))
    assert resolve(endpoint=GW + "/").access_key == "AK"
    elsewhere = resolve(endpoint="http://evil.test")
    assert elsewhere.access_key is None and elsewhere.token is None
    with pytest.raises(ConfigError, match=r"no credentials for http://evil\.test"):
        elsewhere.checked()


def test_an_expired_login_and_no_login_say_what_to_do() -> None:
    with pytest.raises(ConfigError, match="run `jetyard login`"):
        resolve().checked()
    past = datetime.now(UTC) - timedelta(minutes=1)
    save(Credentials(GW, token="old", token_expires_at=past))
    with pytest.raises(ConfigError, match=r"expired at .*run `jetyard login` again"):
        resolve().checked()


def test_a_broken_file_is_named(isolated: Path) -> None:
    config_path().parent.mkdir(parents=True)
    config_path().write_text("endpoint = \n")
    with pytest.raises(ConfigError, match=r"cannot read .*config\.toml"):
        resolve()
