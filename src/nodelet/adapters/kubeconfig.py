"""Reading a kubeconfig file into what the Kubernetes adapter needs to connect.

`write_client_cert_config` writes the kubeconfig of a bootstrapped node.

Supported, as kubectl reads them: the current context (or a named one); `server`;
`certificate-authority` / `certificate-authority-data`; `insecure-skip-tls-verify`; bearer
`token` / `tokenFile`; `client-certificate(-data)` + `client-key(-data)`. Relative file paths
are relative to the kubeconfig's directory. Exec and auth-provider plugins are not supported
(the error says so): give the node a token or a client certificate.

Exceptions::

    KubeconfigError   the file is missing, unreadable, or lacks/contradicts what is needed;
                      the message names the file and the field (a ValueError)
"""

from __future__ import annotations

import base64
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


class KubeconfigError(ValueError):
    """A kubeconfig nodelet cannot use; the message says which file and field."""


@dataclass(frozen=True)
class KubeConfig:
    """Where the API server is and how to authenticate (PEM data, not paths)."""

    server: str
    ca_pem: bytes | None = None
    insecure: bool = False
    token: str | None = None
    client_cert_pem: bytes | None = None
    client_key_pem: bytes | None = None

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for an https server (None for http); KubeconfigError when the
        CA, certificate or key cannot be loaded. Blocking (it writes the client pair to a
        temp dir, which `ssl` wants): call it on a thread from the event loop."""
        if not self.server.startswith("https://"):
            return None
        context = ssl.create_default_context()
        try:
            if self.insecure:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            elif self.ca_pem is not None:
                context.load_verify_locations(cadata=self.ca_pem.decode())
            if self.client_cert_pem is not None and self.client_key_pem is not None:
                # ssl wants files; they live only as long as this call.
                with tempfile.TemporaryDirectory(prefix="nodelet-kube-") as tmp:
                    cert, key = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
                    cert.write_bytes(self.client_cert_pem)
                    key.touch(mode=0o600)
                    key.write_bytes(self.client_key_pem)
                    context.load_cert_chain(cert, key)
        except (ssl.SSLError, ValueError) as exc:
            raise KubeconfigError(f"TLS credentials for {self.server} cannot be used: "
                                  f"{exc}") from exc
        return context


def load(path: Path, *, context: str | None = None) -> KubeConfig:
    """The connection settings of `context` (default: current-context) in kubeconfig `path`."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise KubeconfigError(f"cannot read kubeconfig {path}: {exc}") from exc
    if not isinstance(doc, Mapping):
        raise KubeconfigError(f"kubeconfig {path}: expected a Config object")
    name = context or doc.get("current-context")
    if not name:
        raise KubeconfigError(f"kubeconfig {path}: no current-context; name a context")
    ctx = _named(doc, "contexts", "context", name, path)
    cluster = _named(doc, "clusters", "cluster", ctx.get("cluster"), path)
    user = _named(doc, "users", "user", ctx.get("user"), path) if ctx.get("user") else {}
    server = cluster.get("server")
    if not isinstance(server, str) or not server.startswith(("http://", "https://")):
        raise KubeconfigError(f"kubeconfig {path}: cluster {ctx.get('cluster')!r} needs a "
                              "server URL (http:// or https://)")
    return KubeConfig(
        server=server.rstrip("/"),
        ca_pem=_data(cluster, "certificate-authority", path),
        insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
        token=_token(user, path),
        client_cert_pem=_data(user, "client-certificate", path),
        client_key_pem=_data(user, "client-key", path),
    )


def _named(doc: Mapping[str, Any], section: str, field: str, name: Any,
           path: Path) -> Mapping[str, Any]:
    for entry in doc.get(section) or ():
        if isinstance(entry, Mapping) and entry.get("name") == name:
            value = entry.get(field)
            if isinstance(value, Mapping):
                if section == "users" and ("exec" in value or "auth-provider" in value):
                    raise KubeconfigError(
                        f"kubeconfig {path}: user {name!r} uses an exec/auth-provider plugin, "
                        "which nodelet does not run; use a token or a client certificate")
                return value
    raise KubeconfigError(f"kubeconfig {path}: no {field} named {name!r} in {section}")


def _data(entry: Mapping[str, Any], key: str, path: Path) -> bytes | None:
    inline = entry.get(f"{key}-data")
    if isinstance(inline, str):
        try:
            return base64.b64decode(inline)
        except ValueError as exc:
            raise KubeconfigError(f"kubeconfig {path}: {key}-data is not base64") from exc
    file = entry.get(key)
    if isinstance(file, str):
        return _read(path.parent / file, key, path)
    return None


def _token(user: Mapping[str, Any], path: Path) -> str | None:
    token = user.get("token")
    if isinstance(token, str):
        return token
    file = user.get("tokenFile")
    if isinstance(file, str):
        return _read(path.parent / file, "tokenFile", path).decode().strip()
    return None


def _read(file: Path, key: str, path: Path) -> bytes:
    try:
        return file.read_bytes()
    except OSError as exc:
        raise KubeconfigError(f"kubeconfig {path}: cannot read {key} {file}: {exc}") from exc


def write_client_cert_config(path: Path, *, cluster: KubeConfig, cert_file: Path) -> None:
    """Write (atomically) the kubeconfig the kubelet writes after TLS bootstrap: the bootstrap
    kubeconfig's server and CA, and the client certificate and key both read from `cert_file`
    (the store's `-current` symlink, so a rotation needs no new kubeconfig)."""
    entry: dict[str, Any] = {"server": cluster.server}
    if cluster.ca_pem is not None:
        entry["certificate-authority-data"] = base64.b64encode(cluster.ca_pem).decode()
    if cluster.insecure:
        entry["insecure-skip-tls-verify"] = True
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "default-context",
        "clusters": [{"name": "default-cluster", "cluster": entry}],
        "contexts": [{"name": "default-context",
                      "context": {"cluster": "default-cluster", "user": "default-auth"}}],
        "users": [{"name": "default-auth", "user": {"client-certificate": str(cert_file),
                                                    "client-key": str(cert_file)}}],
    }
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
        tmp.replace(path)
    except OSError as exc:
        raise KubeconfigError(f"cannot write kubeconfig {path}: {exc}") from exc
