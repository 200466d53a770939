"""The node server's serving certificate: the given pair, or a self-signed one made once.

As the kubelet without --tls-cert-file (client-go's GenerateSelfSignedCertKey): at the first
start a throwaway CA signs a serving certificate for the node's hostname, `localhost`, its IPs
and loopback; `<data dir>/pki/nodelet.crt` holds the serving certificate followed by that CA's
(so a client pins the file with `--certificate-authority`), `nodelet.key` the serving key. The
CA's key is never written: nothing can sign another certificate under it. The serving
certificate is not a CA (basicConstraints CA:FALSE, no keyCertSign), and both are valid for a
year, as the kubelet's. Keys are ECDSA P-256: generated in about a millisecond (RSA 2048 takes
tens), and every TLS client kubectl and Go use accepts them.

The pair is reused at later starts, and made again when the serving certificate expires within
`RENEW_BEFORE` or is itself a CA (what nodelet made before, valid ten years).

`write_local_token` makes the node-local credential of the agent's own CLI (a random token in
`<data dir>/pki/node-local.token`, 0600) at every start.

Errors: `CertificateError`, naming the file.
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from nodelet.helpers import privatefiles

# The kubelet's self-signed certificate and its CA are valid for a year
# (GenerateSelfSignedCertKey's default MaxAge).
VALIDITY = datetime.timedelta(days=365)
# A pair whose serving certificate expires sooner than this is made again at start.
RENEW_BEFORE = datetime.timedelta(days=30)


class CertificateError(Exception):
    """The serving certificate or key cannot be read or written."""


@dataclass(frozen=True)
class CertPair:
    cert: Path
    key: Path


def self_signed_paths(data_dir: Path) -> CertPair:
    return CertPair(data_dir / "pki" / "nodelet.crt", data_dir / "pki" / "nodelet.key")


def local_token_path(data_dir: Path) -> Path:
    """The node-local credential (model/core/nodeauth.LocalToken): root-only, made anew at
    every start of the agent, read by its own CLI."""
    return data_dir / "pki" / "node-local.token"


def write_local_token(data_dir: Path) -> str:
    """A new random node-local token, written to `local_token_path` (mode 0600, in the 0700
    pki dir); the one of the previous start stops working. Raises CertificateError."""
    path = local_token_path(data_dir)
    token = secrets.token_urlsafe(32)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        privatefiles.write(path, token.encode() + b"\n", mode=0o600)
    except OSError as exc:
        raise CertificateError(f"cannot write the node-local token to {path}: "
                               f"{exc.strerror}") from exc
    return token


def ensure_self_signed(pair: CertPair, *, hostname: str, ips: Sequence[str]) -> CertPair:
    """`pair` as it is when both files exist and the certificate is still good (see the module
    doc), else a new self-signed pair written there (the key readable by its owner only).
    Blocking (file I/O and key generation): call it on a thread or at start-up."""
    now = datetime.datetime.now(datetime.UTC)
    if pair.cert.is_file() and pair.key.is_file() and _reusable(pair.cert, now):
        return pair
    key = ec.generate_private_key(ec.SECP256R1())
    chain = _build(key, hostname, ips, now)
    try:
        privatefiles.private_dir(pair.key.parent)
        pair.cert.parent.mkdir(parents=True, exist_ok=True)
        privatefiles.write(pair.key, key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()), mode=0o600)
        privatefiles.write(pair.cert, b"".join(
            c.public_bytes(serialization.Encoding.PEM) for c in chain), mode=0o644)
    except OSError as exc:
        raise CertificateError(f"cannot write the serving certificate to {pair.cert}: "
                               f"{exc.strerror}") from exc
    return pair


def _reusable(path: Path, now: datetime.datetime) -> bool:
    """The file's first certificate is readable, no CA, and not about to expire."""
    try:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return False
    return not constraints.ca and cert.not_valid_after_utc - now > RENEW_BEFORE


def _build(key: ec.EllipticCurvePrivateKey, hostname: str, ips: Sequence[str],
           now: datetime.datetime) -> tuple[x509.Certificate, x509.Certificate]:
    """(serving certificate, the throwaway CA's certificate that signed it)."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    stamp = int(now.timestamp())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{hostname}-ca@{stamp}")])
    ca = (_valid(x509.CertificateBuilder(), now)
          .subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key())
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(_key_usage(cert_sign=True), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                         critical=False)
          .sign(ca_key, hashes.SHA256()))
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{hostname}@{stamp}")])
    addresses = {ipaddress.ip_address(a) for a in (*ips, "127.0.0.1", "::1")}
    alt_names: list[x509.GeneralName] = [x509.DNSName(n) for n in dict.fromkeys(
        (hostname, "localhost"))]
    alt_names += [x509.IPAddress(a) for a in sorted(addresses, key=str)]
    serving = (_valid(x509.CertificateBuilder(), now)
               .subject_name(name).issuer_name(ca_name)
               .public_key(key.public_key())
               .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(_key_usage(cert_sign=False), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                              critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                   ca_key.public_key()), critical=False)
               .sign(ca_key, hashes.SHA256()))
    return serving, ca


def _valid(builder: x509.CertificateBuilder, now: datetime.datetime) -> x509.CertificateBuilder:
    # From an hour before, as the kubelet's: a client whose clock is a little behind accepts it.
    return (builder.serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now - datetime.timedelta(hours=1) + VALIDITY))


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True, key_encipherment=False, content_commitment=False,
        data_encipherment=False, key_agreement=False, key_cert_sign=cert_sign,
        crl_sign=False, encipher_only=False, decipher_only=False)
