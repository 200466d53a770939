"""`nodelet run`'s flags for the node server (port 10250), named as the kubelet's, and their
mapping onto `settings.NodeServerSettings` (docs/server.md). The CLI side of the node server
(`nodelet exec`, `attach`, `port-forward`, `top`) is `nodecommands`.

Exceptions: `settings.SettingsError` for a flag value that cannot work (the port).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from nodelet import settings
from nodelet.model.core import durations


def add_server_flags(run: argparse.ArgumentParser) -> None:
    """`nodelet run`'s flags for the node server, named as the kubelet's."""
    run.add_argument("--port", type=int, default=10250,
                     help="node server port (logs, exec, port-forward, stats; TLS) "
                          "(default: %(default)s)")
    run.add_argument("--address", default="0.0.0.0",
                     help="node server address (default: %(default)s)")
    run.add_argument("--tls-cert-file", type=Path, metavar="FILE",
                     help="serving certificate (PEM); default: self-signed, made at the first "
                          "start in <data-dir>/pki/nodelet.crt")
    run.add_argument("--tls-private-key-file", type=Path, metavar="FILE")
    run.add_argument("--client-ca-file", type=Path, metavar="FILE",
                     help="client certificates it signed authenticate (CN user, O groups)")
    run.add_argument("--token-auth-file", type=Path, metavar="FILE",
                     help='bearer tokens, CSV lines token,user,uid,"group1,group2"')
    run.add_argument("--node-local-credential", action=argparse.BooleanOptionalAction,
                     default=True,
                     help="make a token at start in <data-dir>/pki/node-local.token (root "
                          "only) that nodelet's CLI uses from this host; accepted from "
                          "loopback only (default: on)")
    run.add_argument("--anonymous-auth", action=argparse.BooleanOptionalAction, default=False,
                     help="requests without credentials run as system:anonymous instead of "
                          "getting 401 (default: off)")
    run.add_argument("--authentication-token-webhook", action=argparse.BooleanOptionalAction,
                     default=None,
                     help="check bearer tokens with the API server's TokenReview (default: on "
                          "in cluster mode, off standalone)")
    run.add_argument("--authentication-token-webhook-cache-ttl", type=_duration("2m0s"),
                     default="2m0s", metavar="DURATION",
                     help="how long TokenReview answers are kept (default: %(default)s)")
    run.add_argument("--authorization-mode", choices=("AlwaysAllow", "Webhook"), default=None,
                     help="Webhook: each request is authorized by the API server's "
                          "SubjectAccessReview; AlwaysAllow: any authenticated user may do "
                          "anything (default: Webhook in cluster mode, AlwaysAllow standalone)")
    run.add_argument("--authorization-webhook-cache-authorized-ttl", type=_duration("5m0s"),
                     default="5m0s", metavar="DURATION",
                     help="how long an allowed answer is kept (default: %(default)s)")
    run.add_argument("--authorization-webhook-cache-unauthorized-ttl", type=_duration("30s"),
                     default="30s", metavar="DURATION",
                     help="how long a denied answer is kept (default: %(default)s)")


def _duration(example: str) -> Any:
    """An argparse type: seconds of a Go duration (also applied to the string default)."""
    def convert(text: str | float) -> float:
        if isinstance(text, float):
            return text
        seconds = durations.duration_seconds(text)
        if seconds is None:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a duration (write e.g. {example}, 90s, 0s)")
        return seconds
    return convert


def node_server_settings(args: argparse.Namespace) -> settings.NodeServerSettings:
    if not 0 <= args.port < 65536:
        raise settings.SettingsError(f"--port {args.port}: must be 0 to 65535")

    def resolved(path: Path | None) -> Path | None:
        return path.resolve() if path is not None else None

    return settings.NodeServerSettings(
        address=args.address, port=args.port, tls_cert_file=resolved(args.tls_cert_file),
        tls_private_key_file=resolved(args.tls_private_key_file),
        client_ca_file=resolved(args.client_ca_file),
        token_auth_file=resolved(args.token_auth_file),
        node_local_credential=args.node_local_credential, anonymous_auth=args.anonymous_auth,
        authentication_token_webhook=args.authentication_token_webhook,
        authentication_token_webhook_cache_ttl=args.authentication_token_webhook_cache_ttl,
        authorization_mode=args.authorization_mode,
        authorization_webhook_cache_authorized_ttl=(
            args.authorization_webhook_cache_authorized_ttl),
        authorization_webhook_cache_unauthorized_ttl=(
            args.authorization_webhook_cache_unauthorized_ttl))
