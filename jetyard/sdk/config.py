"""Where the ``jetyard`` user commands and ``AsyncClient.from_config`` find the gateway and
their credentials, and what ``jetyard login`` keeps.

The file is ``$XDG_CONFIG_HOME/jetyard/config.toml`` (else ``~/.config/jetyard/config.toml``),
mode 0600 in a 0700 directory, written whole and renamed into place. It holds the endpoint
and either a keypair or a login token with its expiry, never a password. Each value is taken
from the first that has it: a command-line option, ``JETYARD_ENDPOINT`` /
``JETYARD_ACCESS_KEY`` / ``JETYARD_SECRET_KEY``, the file, then (the endpoint only) the one
``jetyard up`` running on this machine, then ``http://127.0.0.1:8080``. The file's
credentials are used only with the file's endpoint: they are never sent to another one.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

DEFAULT_ENDPOINT = "http://127.0.0.1:8080"
FIELDS = ("endpoint", "access_key", "secret_key", "token", "token_expires_at", "email")


class ConfigError(RuntimeError):
    """No usable credentials, or a config file that cannot be read; says what to do."""


@dataclass(frozen=True)
class Credentials:
    endpoint: str
    access_key: str | None = None
    secret_key: str | None = None
    token: str | None = None
    token_expires_at: datetime | None = None
    email: str | None = None
    source: str = "nothing"
    """Where the credentials came from: options, environment, a file's path, nothing."""

    def checked(self, now: datetime | None = None) -> Credentials:
        """These, if they can sign in; else ``ConfigError`` saying how to get some."""
        if self.access_key and self.secret_key:
            return self
        if self.token:
            expires = self.token_expires_at
            if expires is not None and expires <= (now or datetime.now(UTC)):
                raise ConfigError(
                    f"the login to {self.endpoint} kept in {self.source} expired at "
                    f"{expires.isoformat(timespec='seconds')}: run `jetyard login` again"
                )
            return self
        raise ConfigError(
            f"no credentials for {self.endpoint}: run `jetyard login`, or set "
            "JETYARD_ACCESS_KEY and JETYARD_SECRET_KEY"
        )


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "jetyard" / "config.toml"


def load(path: Path | None = None) -> Credentials | None:
    """What the file keeps; None without one."""
    path = path or config_path()
    try:
        found = tomllib.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    expires = found.get("token_expires_at")
    if isinstance(expires, str):
        expires = datetime.fromisoformat(expires)
    if not isinstance(found.get("endpoint"), str):
        raise ConfigError(f"{path} names no endpoint: run `jetyard login` again")
    return Credentials(
        endpoint=found["endpoint"],
        access_key=found.get("access_key"),
        secret_key=found.get("secret_key"),
        token=found.get("token"),
        token_expires_at=expires if isinstance(expires, datetime) else None,
        email=found.get("email"),
        source=str(path),
    )


def save(credentials: Credentials, path: Path | None = None) -> Path:
    """Keep these (replacing what was kept), readable by their owner alone."""
    path = path or config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    lines = ["# Written by `jetyard login`; `jetyard logout` removes it."]
    for name in FIELDS:
        value = getattr(credentials, name)
        if isinstance(value, datetime):
            value = value.isoformat(timespec="seconds")
        if value is not None:
            lines.append(f"{name} = {json.dumps(value)}")  # a JSON string is a TOML string
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write("\n".join(lines) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)
    return path


def forget(path: Path | None = None) -> bool:
    """Remove the file; whether there was one."""
    path = path or config_path()
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def token_expiry(expires_in_s: int, now: datetime | None = None) -> datetime:
    return (now or datetime.now(UTC)) + timedelta(seconds=expires_in_s)


def default_endpoint() -> str:
    """The gateway of the ``jetyard up`` running here (of several, the one on this user's
    default data directory), else the usual port."""
    from jetyard.stacks import preferred, running

    chosen = preferred(running())
    return chosen.gateway_url if chosen is not None else DEFAULT_ENDPOINT


def resolve(
    endpoint: str | None = None,
    access_key: str | None = None,
    secret_key: str | None = None,
    path: Path | None = None,
) -> Credentials:
    """Options, then the environment, then the file (see the module's docstring)."""
    env = os.environ
    endpoint = endpoint or env.get("JETYARD_ENDPOINT")
    if access_key or secret_key:
        keypair, source = (access_key, secret_key), "options"
    else:
        keypair, source = (env.get("JETYARD_ACCESS_KEY"), env.get("JETYARD_SECRET_KEY")), "env"
    kept = load(path)
    if keypair[0] or keypair[1]:
        if not (keypair[0] and keypair[1]):
            raise ConfigError(
                "a keypair needs both its access key and its secret key (--access-key and "
                "--secret-key, or JETYARD_ACCESS_KEY and JETYARD_SECRET_KEY)"
            )
        where = endpoint or (kept.endpoint if kept else None) or default_endpoint()
        return Credentials(where, keypair[0], keypair[1], source=source)
    if kept is not None and (endpoint is None or _same(endpoint, kept.endpoint)):
        return kept
    return Credentials(endpoint or default_endpoint())


def _same(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")
