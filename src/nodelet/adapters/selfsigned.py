"""The node server's self-signed pair, checked and made with `cryptography`: run as a child
process (`python -m nodelet.adapters.selfsigned CERT KEY HOSTNAME [IP...]`) by
`servingcerts.ensure_self_signed`, so the agent itself never imports `cryptography`.

As the kubelet without --tls-cert-file (client-go's GenerateSelfSignedCertKey): a throwaway CA
signs a serving certificate for the node's hostname, `localhost`, its IPs and loopback; the
certificate file holds the serving certificate followed by that CA's (so a client pins the
file with `--certificate-authority`), the key file the serving key. The CA's key is never
written: nothing can sign another certificate under it. The serving certificate is not a CA
(basicConstraints CA:FALSE, no keyCertSign), and both are valid for a year, as the kubelet's.
Keys are ECDSA P-256: generated in about a millisecond (RSA 2048 takes tens), and every TLS
client kubectl and Go use accepts them.

The pair is reused when both files exist, and made again when the serving certificate expires
within `RENEW_BEFORE` or is itself a CA (what nodelet made before, valid ten years).

As a child: exit status 0 when the pair is good (reused or made), `servingcerts.REFUSED` with
the `servingcerts.CertificateError` message on stderr when it cannot be written.
"""

from __future__ import annotations

import datetime
import ipaddress
import sys
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from nodelet.adapters import servingcerts
from nodelet.helpers import privatefiles

# The kubelet's self-signed certificate and its CA are valid for a year
# (GenerateSelfSignedCertKey's default MaxAge).
VALIDITY = datetime.timedelta(days=365)
# A pair whose serving certificate expires sooner than this is made again at start.
RENEW_BEFORE = datetime.timedelta(days=30)


def ensure(pair: servingcerts.CertPair, *, hostname: str, ips: Sequence[str]) -> None:
    """Leave `pair` as it is when both files exist and the certificate is still good (see the
    module doc), else write a new self-signed pair there (the key readable by its owner only).
    Raises servingcerts.CertificateError."""
    now = datetime.datetime.now(datetime.UTC)
    if pair.cert.is_file() and pair.key.is_file() and _reusable(pair.cert, now):
        return
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
        raise servingcerts.CertificateError(
            f"cannot write the serving certificate to {pair.cert}: {exc.strerror}") from exc


def main(argv: Sequence[str]) -> int:
    """The child's entry: CERT KEY HOSTNAME [IP...]."""
    cert, key, hostname, *ips = argv
    try:
        ensure(servingcerts.CertPair(Path(cert), Path(key)), hostname=hostname, ips=ips)
    except servingcerts.CertificateError as exc:
        print(exc, file=sys.stderr)
        return servingcerts.REFUSED
    return 0


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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
