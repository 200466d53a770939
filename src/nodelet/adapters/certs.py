"""Keys, certificate signing requests and the client certificate store (cryptography).

- `new_key()`: a fresh EC P-256 private key (PEM), the kubelet's key type;
- `node_csr(key_pem, node_name)`: a PEM CSR for CN `system:node:<name>`, O `system:nodes`;
- `validity(cert_pem)`: the certificate's notBefore/notAfter;
- `check_pair(cert_pem, key_pem)`: Go's tls.X509KeyPair check: the certificate is X.509 and
  its public key is the private key's;
- `CertStore`: the kubelet's file store (`certificate.NewFileStore`): each certificate and its
  key in one PEM file `<prefix>-<YYYY-MM-DD-HH-MM-SS>.pem` (mode 0600, in a 0700 directory),
  and the symlink `<prefix>-current.pem` pointing at the newest; both written atomically
  (`helpers.privatefiles`, temp symlink + rename), so a reader (or a crash) sees the old pair
  or the new, never half. As upstream's store (X509KeyPair before Update), a pair that fails
  `check_pair` is never written.

Exceptions::

    CertError   a PEM that cannot be read, or a store that cannot be written; the message
                names the file (a ValueError)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from nodelet.helpers import privatefiles

NODE_GROUP = "system:nodes"
NODE_USER_PREFIX = "system:node:"


class CertError(ValueError):
    """A certificate or key nodelet cannot use; the message names it."""


@dataclass(frozen=True)
class Validity:
    not_before: datetime
    not_after: datetime


def new_key() -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def node_csr(key_pem: bytes, node_name: str) -> bytes:
    """The PEM certificate request of node `node_name`, signed with `key_pem`."""
    key = serialization.load_pem_private_key(key_pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertError("the node's private key is not an EC key")
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, NODE_GROUP),
                         x509.NameAttribute(NameOID.COMMON_NAME, NODE_USER_PREFIX + node_name)])
    request = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(
        key, hashes.SHA256())
    return request.public_bytes(serialization.Encoding.PEM)


def validity(cert_pem: bytes, *, what: str = "certificate") -> Validity:
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError as exc:
        raise CertError(f"{what}: not a PEM certificate: {exc}") from exc
    return Validity(cert.not_valid_before_utc, cert.not_valid_after_utc)


def check_pair(cert_pem: bytes, key_pem: bytes, *, what: str = "certificate") -> Validity:
    """The validity of `cert_pem` once it is an X.509 certificate whose public key is that of
    `key_pem` (Go's tls.X509KeyPair, which the kubelet's store runs before storing a pair);
    raises CertError naming `what`."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError as exc:
        raise CertError(f"{what}: not a PEM X.509 certificate: {exc}") from exc
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise CertError(f"{what}: the private key cannot be read: {exc}") from exc
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if cert.public_key().public_bytes(*spki) != key.public_key().public_bytes(*spki):
        raise CertError(f"{what}: private key does not match public key")  # Go's words
    return Validity(cert.not_valid_before_utc, cert.not_valid_after_utc)


def split_pem(data: bytes) -> tuple[bytes, bytes]:
    """(certificate PEM, private key PEM) of a store file holding both."""
    cert, key = b"", b""
    for block in data.split(b"-----END ")[:-1]:
        start = block.find(b"-----BEGIN ")
        label = block[start + 11:block.find(b"-----", start + 11)]
        pem = block[start:] + b"-----END " + label + b"-----\n"
        if label == b"CERTIFICATE":
            cert += pem
        elif label.endswith(b"PRIVATE KEY"):
            key = pem
    return cert, key


class CertStore:
    """The certificate/key pairs of one kind (`prefix`, e.g. kubelet-client) in `directory`."""

    def __init__(self, directory: Path, prefix: str = "kubelet-client") -> None:
        self.directory = directory
        self.prefix = prefix

    @property
    def current(self) -> Path:
        return self.directory / f"{self.prefix}-current.pem"

    def load(self) -> tuple[bytes, bytes] | None:
        """(certificate, key) PEM of the current pair; None when there is none yet."""
        try:
            data = self.current.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CertError(f"cannot read {self.current}: {exc}") from exc
        cert, key = split_pem(data)
        if not cert or not key:
            raise CertError(f"{self.current}: expected a certificate and a private key")
        return cert, key

    def write(self, cert_pem: bytes, key_pem: bytes, *, now: datetime | None = None) -> Path:
        """Store the pair and point `current` at it; the new file's path. Raises CertError
        for a pair that fails `check_pair` (nothing is written) or a store that cannot be
        written. Blocking (fsync): call it on a thread."""
        check_pair(cert_pem, key_pem, what=f"the new {self.prefix} certificate")
        stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%d-%H-%M-%S")
        target = self.directory / f"{self.prefix}-{stamp}.pem"
        try:
            privatefiles.private_dir(self.directory)
            privatefiles.write(target, cert_pem + key_pem)
            link = self.directory / f".{self.prefix}-current.tmp"
            link.unlink(missing_ok=True)
            link.symlink_to(target.name)
            link.replace(self.current)
            privatefiles.sync_dir(self.directory)
        except OSError as exc:
            raise CertError(f"cannot store the certificate in {self.directory}: {exc}") from exc
        return target
