"""The node server's serving certificate: the given pair, or a self-signed one made once.

As the kubelet without --tls-cert-file: a self-signed certificate and key are generated at the
first start into the data dir (`<data dir>/pki/nodelet.crt` and `.key`, the kubelet's
`<cert-dir>/kubelet.crt`) and reused later, with the node's hostname, `localhost`, its IPs and
loopback as subject alternative names. The key is ECDSA P-256: generated in about a millisecond
(RSA 2048 takes tens), and every TLS client kubectl and Go use accepts it. The certificate is
its own CA (basicConstraints CA), so a client can pin it with `--certificate-authority`.

Errors: `CertificateError`, naming the file.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from nodelet.helpers import privatefiles

# The kubelet's self-signed certificate is valid for a year; ours is renewed only by deleting
# it, so it lasts longer.
_VALIDITY = datetime.timedelta(days=3650)


class CertificateError(Exception):
    """The serving certificate or key cannot be read or written."""


@dataclass(frozen=True)
class CertPair:
    cert: Path
    key: Path


def self_signed_paths(data_dir: Path) -> CertPair:
    return CertPair(data_dir / "pki" / "nodelet.crt", data_dir / "pki" / "nodelet.key")


def ensure_self_signed(pair: CertPair, *, hostname: str, ips: Sequence[str]) -> CertPair:
    """`pair` as it is when both files exist, else a new self-signed pair written there (the
    key readable by its owner only). Blocking (file I/O and key generation): call it on a
    thread or at start-up."""
    if pair.cert.is_file() and pair.key.is_file():
        return pair
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _build(key, hostname, ips)
    try:
        privatefiles.private_dir(pair.key.parent)
        pair.cert.parent.mkdir(parents=True, exist_ok=True)
        privatefiles.write(pair.key, key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()), mode=0o600)
        privatefiles.write(pair.cert, cert.public_bytes(serialization.Encoding.PEM), mode=0o644)
    except OSError as exc:
        raise CertificateError(f"cannot write the serving certificate to {pair.cert}: "
                               f"{exc.strerror}") from exc
    return pair


def _build(key: ec.EllipticCurvePrivateKey, hostname: str, ips: Sequence[str]) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{hostname}@nodelet")])
    addresses = {ipaddress.ip_address(a) for a in (*ips, "127.0.0.1", "::1")}
    alt_names: list[x509.GeneralName] = [x509.DNSName(n) for n in dict.fromkeys(
        (hostname, "localhost"))]
    alt_names += [x509.IPAddress(a) for a in sorted(addresses, key=str)]
    return (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_encipherment=False, content_commitment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(key, hashes.SHA256()))
