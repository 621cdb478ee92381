"""A real Docker registry for the tests (Debian's ``docker-registry``, distribution 2.8, from
``scripts/ensure-registry``): one child process per test on a free 127.0.0.1 port, with
htpasswd (bcrypt) authentication or a Bearer token service, delete-enabled storage in a
temporary folder, and optionally TLS with a test CA. Also pushing a local image to it, and
building multi-layer images with labels from the local ``jetyard-busybox:latest``
(``scripts/ensure-docker``). Synchronous; no subjects.

Usage::

    with running_registry(tmp_path) as reg:
        digest = push(reg, "jetyard-busybox:latest", f"t-{uuid.uuid4().hex[:8]}/busybox:v1")

Repository names are the caller's to make unique: tests share one Docker engine, and a test
that shares a registry (a module fixture) shares its catalog.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import http.server
import ipaddress
import json
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from dataclasses import replace as dataclasses_replace
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

BASE_IMAGE = "jetyard-busybox:latest"
REALM = "jetyard-test"
START_TIMEOUT_S = 15.0
STOP_GRACE_S = 5.0
DOCKER_CERTS = Path("/etc/docker/certs.d")
TOKEN_SERVICE = "jetyard-test-registry"
TOKEN_ISSUER = "jetyard-test-tokens"


class RegistryStartError(RuntimeError):
    """The registry did not come up; the message carries its log."""


@dataclass(frozen=True)
class Registry:
    """A running registry. ``url`` is ``http(s)://127.0.0.1:PORT``; ``host`` is
    ``127.0.0.1:PORT``, as Docker names it in image references."""

    url: str
    host: str
    username: str
    password: str
    data_dir: Path
    process: subprocess.Popen[bytes]
    log_path: Path
    ca_pem: str | None = None
    ca_path: Path | None = None
    tokens: TokenService | None = None
    """With ``token_auth``: the token service the registry sends clients to."""

    @classmethod
    def start(cls, tmp: Path, *, tls_name: str | None = None, token_auth: bool = False) -> Registry:
        """Start one under ``tmp`` (storage, config, password file, log). With ``tls_name`` it
        serves https with a certificate for that DNS name and for IP 127.0.0.1, signed by a
        fresh test CA (``ca_pem``, ``ca_path``). With ``token_auth`` it asks for Bearer tokens
        from a ``TokenService`` (as Harbor, GitHub and NGC do) instead of basic auth."""
        root = Path(tempfile.mkdtemp(prefix="registry-", dir=tmp))
        username = f"u{secrets.token_hex(4)}"
        password = secrets.token_urlsafe(18)
        htpasswd = root / "htpasswd"
        htpasswd.write_bytes(_run(["htpasswd", "-Bbn", username, password]).stdout)
        tokens = TokenService(username, password, root) if token_auth else None
        auth: dict[str, object] = {"htpasswd": {"realm": REALM, "path": str(htpasswd)}}
        if tokens is not None:
            auth = {
                "token": {
                    "realm": tokens.realm,
                    "service": TOKEN_SERVICE,
                    "issuer": TOKEN_ISSUER,
                    "rootcertbundle": str(tokens.bundle_path),
                }
            }
        tls: dict[str, str] = {}
        ca_pem: str | None = None
        ca_path: Path | None = None
        if tls_name is not None:
            ca_pem, cert_pem, key_pem = _make_certificates(tls_name)
            ca_path, cert_path, key_path = root / "ca.crt", root / "server.crt", root / "server.key"
            ca_path.write_text(ca_pem)
            cert_path.write_text(cert_pem)
            key_path.write_text(key_pem)
            tls = {"certificate": str(cert_path), "key": str(key_path)}
        data_dir = root / "data"
        data_dir.mkdir()
        last_log = ""
        # A free port is found by binding port 0 and letting it go; another process may take it
        # before the registry binds it, so a failed start is tried again on a new port.
        for _ in range(3):
            port = _free_port()
            host = f"127.0.0.1:{port}"
            config = {
                "version": 0.1,
                "log": {"level": "warn", "accesslog": {"disabled": True}},
                "storage": {
                    "filesystem": {"rootdirectory": str(data_dir)},
                    "delete": {"enabled": True},
                },
                "http": {
                    "addr": host,
                    "secret": secrets.token_hex(16),
                    **({"tls": tls} if tls else {}),
                },
                "auth": auth,
            }
            # YAML is a superset of JSON: no YAML library needed.
            config_path = root / "config.yml"
            config_path.write_text(json.dumps(config))
            log_path = root / f"registry-{port}.log"
            with log_path.open("wb") as log:
                process = subprocess.Popen(
                    ["docker-registry", "serve", str(config_path)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            registry = cls(
                url=f"{'https' if tls else 'http'}://{host}",
                host=host,
                username=username,
                password=password,
                data_dir=data_dir,
                process=process,
                log_path=log_path,
                ca_pem=ca_pem,
                ca_path=ca_path,
                tokens=tokens,
            )
            if registry._wait_until_up():
                return registry
            registry.stop(tokens_too=False)
            last_log = log_path.read_text(errors="replace")
        if tokens is not None:
            tokens.stop()
        raise RegistryStartError(f"docker-registry did not start; its log:\n{last_log}")

    def stop(self, *, tokens_too: bool = True) -> None:
        """Terminate it; kill it if it has not ended after ``STOP_GRACE_S``."""
        if tokens_too and self.tokens is not None:
            self.tokens.stop()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client context trusting the test CA (None for a plain-http registry)."""
        if self.ca_pem is None:
            return None
        return ssl.create_default_context(cadata=self.ca_pem)

    def get(self, path: str, *, auth: bool = True) -> tuple[int, bytes]:
        """``GET url+path``, with basic auth unless ``auth`` is false: (status, body). In
        token mode the registry refuses basic auth (401): read it with a token client."""
        request = urllib.request.Request(self.url + path)
        if auth:
            token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=5, context=self.ssl_context()) as reply:
                return int(reply.status), bytes(reply.read())
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def _wait_until_up(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            with contextlib.suppress(OSError):
                if self.get("/v2/", auth=False)[0] == 401:
                    return True
            time.sleep(0.1)
        return False


class TokenService:
    """The token service of a registry in token mode (the Docker token spec): it gives one
    user (basic auth) every scope asked for, as a JWT signed with a key whose self-signed
    certificate is the registry's ``rootcertbundle``; anyone else gets 401. ``scopes`` lists
    what each token request asked for ("" for none), in order."""

    def __init__(self, username: str, password: str, folder: Path) -> None:
        self._login = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()
        self._username = username
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Jetyard test token signer")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .sign(self._key, hashes.SHA256())
        )
        self._x5c = base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()
        self.bundle_path = folder / "token-signer.crt"
        self.bundle_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self.scopes: list[str] = []
        service = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                asked = query.get("scope", [])
                service.scopes.append(" ".join(asked))
                if self.headers.get("Authorization") != service._login:
                    self.send_response(401)
                    self.end_headers()
                    return
                token = service._token(query.get("service", [""])[0], asked)
                body = json.dumps({"token": token, "expires_in": 300}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.realm = f"http://127.0.0.1:{self._server.server_address[1]}/token"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _token(self, audience: str, scopes: list[str]) -> str:
        now = int(time.time())
        access = []
        for scope in " ".join(scopes).split():
            kind, *name, actions = scope.split(":")
            access.append({"type": kind, "name": ":".join(name), "actions": actions.split(",")})
        claims = {
            "iss": TOKEN_ISSUER,
            "sub": self._username,
            "aud": audience,
            "exp": now + 300,
            "nbf": now - 5,
            "iat": now,
            "jti": secrets.token_hex(8),
            "access": access,
        }
        header = {"typ": "JWT", "alg": "ES256", "x5c": [self._x5c]}
        signed = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        r, s = decode_dss_signature(self._key.sign(signed.encode(), ec.ECDSA(hashes.SHA256())))
        # JWS wants ES256 as the raw 32-byte r and s, not the DER that cryptography gives.
        return f"{signed}.{_b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@contextlib.contextmanager
def running_registry(
    tmp: Path, *, tls_name: str | None = None, token_auth: bool = False
) -> Iterator[Registry]:
    """A registry for the ``with`` block, stopped afterwards (see ``Registry.start``)."""
    registry = Registry.start(tmp, tls_name=tls_name, token_auth=token_auth)
    try:
        yield registry
    finally:
        registry.stop()


@contextlib.contextmanager
def trust_ca_for_docker(registry: Registry) -> Iterator[Path]:
    """Make the Docker engine trust the registry's test CA for the ``with`` block: writes
    ``/etc/docker/certs.d/<host:port>/ca.crt`` (the engine reads it on each pull/push, no
    restart) and removes it afterwards. Needs root. Not needed for pushing to a 127.0.0.1
    registry, which the engine treats as insecure (it skips verification there), but it is
    what a node pulling from a TLS registry under a real name needs."""
    if registry.ca_pem is None:
        raise ValueError(f"{registry.url} serves plain http: there is no CA to trust")
    folder = DOCKER_CERTS / registry.host
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ca.crt"
    path.write_text(registry.ca_pem)
    try:
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def push(registry: Registry, source_image: str, repo_tag: str) -> str:
    """Push the local ``source_image`` as ``<host>/<repo_tag>`` and return the manifest
    digest (``sha256:...``). Logs in with a temporary ``DOCKER_CONFIG`` (``~/.docker`` is
    never touched), and removes the pushed reference locally afterwards, so the engine does
    not hold ``<host>/<repo_tag>`` (a node test can pull it)."""
    target = f"{registry.host}/{repo_tag}"
    repo = target.rsplit(":", 1)[0] if ":" in repo_tag else target
    with tempfile.TemporaryDirectory(prefix="docker-config-") as config:
        docker = ["docker", "--config", config]
        _run(
            [*docker, "login", "-u", registry.username, "--password-stdin", registry.host],
            stdin=registry.password.encode(),
        )
        _run([*docker, "tag", source_image, target])
        try:
            out = _run([*docker, "push", target]).stdout.decode(errors="replace")
        finally:
            remove_local_image(target)
    digest = _pushed_digest(out, target)
    # The engine also remembers the pushed digest (RepoDigests): without this, a pull by
    # digest would find the image locally.
    remove_local_image(f"{repo}@{digest}")
    return digest


def build_layered_image(
    tag: str, layers: int, layer_bytes: int, labels: Mapping[str, str] | None = None
) -> str:
    """Build ``tag`` locally from ``jetyard-busybox:latest`` with ``layers`` extra layers of
    ``layer_bytes`` random (incompressible) bytes each, and ``labels``. No network: the base
    image is local and never pulled. Returns ``tag``; ``remove_local_image`` removes it."""
    with tempfile.TemporaryDirectory(prefix="layered-") as context:
        lines = [f"FROM {BASE_IMAGE}"]
        for index in range(layers):
            name = f"layer{index}.bin"
            with open(os.path.join(context, name), "wb") as out:
                left = layer_bytes
                while left > 0:
                    chunk = min(left, 1 << 20)
                    out.write(os.urandom(chunk))
                    left -= chunk
            lines.append(f"COPY {name} /jetyard-layers/{name}")
        Path(context, "Dockerfile").write_text("\n".join(lines) + "\n")
        # --label, not LABEL lines: no Dockerfile quoting or $-expansion of the values.
        label_args = [arg for k, v in (labels or {}).items() for arg in ("--label", f"{k}={v}")]
        # The classic builder: it resolves FROM in the local image store and never fetches.
        _run(
            ["docker", "build", "--pull=false", "-q", "-t", tag, *label_args, context],
            env={**os.environ, "DOCKER_BUILDKIT": "0"},
        )
    return tag


def remove_local_image(ref: str) -> None:
    """``docker rmi -f ref``; an image that is not there is fine."""
    result = subprocess.run(["docker", "rmi", "-f", ref], capture_output=True, check=False)
    if result.returncode != 0 and b"No such image" not in result.stderr:
        raise RuntimeError(f"docker rmi -f {ref} failed: {result.stderr.decode(errors='replace')}")


def local_image_exists(ref: str) -> bool:
    result = subprocess.run(["docker", "image", "inspect", ref], capture_output=True, check=False)
    return result.returncode == 0


def _run(
    argv: list[str], *, stdin: bytes | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    result = subprocess.run(
        argv, input=stdin, capture_output=True, check=False, env=dict(env) if env else None
    )
    if result.returncode != 0:
        # argv never holds a password (login reads it from stdin).
        raise RuntimeError(
            f"{' '.join(argv)} exited {result.returncode}: "
            f"{(result.stderr or result.stdout).decode(errors='replace').strip()}"
        )
    return result


def _pushed_digest(output: str, target: str) -> str:
    # `docker push` ends with "<tag>: digest: sha256:<hex> size: <n>".
    for line in reversed(output.splitlines()):
        if "digest: sha256:" in line:
            return line.split("digest: ", 1)[1].split()[0]
    raise RuntimeError(f"docker push {target} printed no digest:\n{output}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _make_certificates(dns_name: str) -> tuple[str, str, str]:
    """(CA certificate, server certificate, server key), PEM, valid for a day. Key usages and
    key identifiers are set because Python's strict X.509 verification requires them."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Jetyard test CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(dns_name), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return ca.public_bytes(pem).decode(), server.public_bytes(pem).decode(), key_pem


@contextlib.contextmanager
def throttled(registry: Registry, bytes_per_s: int) -> Iterator[Registry]:
    """The registry behind a TCP proxy on another 127.0.0.1 port that sends what the registry
    answers at most ``bytes_per_s``: the same registry (its content does not name its host),
    reached as ``127.0.0.1:<proxy port>``, whose pulls take a predictable while."""
    target_host, target_port = registry.host.rsplit(":", 1)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stopping = threading.Event()

    def pipe(source: socket.socket, sink: socket.socket, limit: int | None) -> None:
        try:
            while not stopping.is_set():
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
                if limit:
                    time.sleep(len(data) / limit)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def serve() -> None:
        listener.settimeout(0.2)
        while not stopping.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection((target_host, int(target_port)))
            threading.Thread(target=pipe, args=(client, upstream, None), daemon=True).start()
            threading.Thread(target=pipe, args=(upstream, client, bytes_per_s), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    host = f"127.0.0.1:{port}"
    scheme = registry.url.split("://", 1)[0]
    try:
        yield dataclasses_replace(registry, host=host, url=f"{scheme}://{host}")
    finally:
        stopping.set()
        listener.close()
        thread.join(timeout=5)
