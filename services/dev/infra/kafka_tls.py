"""The local broker's TLS: a certificate authority of its own and the broker's certificate.

Made with PyCA ``cryptography`` (already a dependency) rather than Java's keytool: one
in-process step instead of five JVM starts (each a second or more on a loaded machine),
exact control of the certificate's names and constraints, and PEM files throughout: Kafka
reads a PEM key store (``ssl.keystore.type=PEM``, KIP-651) and Python clients a PEM CA
(``KAFKA_SSL_CAFILE``), so no JKS / PKCS#12 store and no store password exist at all.

- ``<home>/tls/ca.pem``: the CA certificate, public, for clients (hostname checking on).
- ``<home>/secrets/ca.key``: the CA's private key (0600, in the 0700 secrets folder).
- ``<home>/secrets/broker.pem``: the broker's private key (PKCS#8) and its certificate chain.

Keys are ECDSA P-256; the CA lives ten years, the broker certificate one. The broker
certificate names every host a client may connect to (``localhost``, ``127.0.0.1`` and the
TLS listener's host): it is issued again from the same CA, so the clients' CA file stays
valid, when a name is missing, when it expires within 30 days, or when the CA changed.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from services.dev.infra.common import private_folder, write_private
from services.dev.infra.processes import progress

CA_LIFETIME = datetime.timedelta(days=3650)
BROKER_LIFETIME = datetime.timedelta(days=365)
RENEW_BEFORE = datetime.timedelta(days=30)


@dataclass(frozen=True)
class TlsFiles:
    """Where one broker's TLS files are."""

    ca_cert: Path
    ca_key: Path
    broker_pem: Path

    @classmethod
    def under(cls, home: Path) -> TlsFiles:
        return cls(
            ca_cert=home / "tls" / "ca.pem",
            ca_key=home / "secrets" / "ca.key",
            broker_pem=home / "secrets" / "broker.pem",
        )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _key_usage(*allowed: str) -> x509.KeyUsage:
    flags = "digital_signature content_commitment key_encipherment data_encipherment"
    flags += " key_agreement key_cert_sign crl_sign encipher_only decipher_only"
    return x509.KeyUsage(**{flag: flag in allowed for flag in flags.split()})


def _pem(item: x509.Certificate | ec.EllipticCurvePrivateKey) -> bytes:
    if isinstance(item, x509.Certificate):
        return item.public_bytes(serialization.Encoding.PEM)
    return item.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    lifetime: datetime.timedelta,
) -> x509.CertificateBuilder:
    """A certificate of ``key`` for ``subject``, issued by ``issuer`` (None: self-signed)."""
    now, public = _now(), key.public_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer[0].subject if issuer else name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(
            min(now + lifetime, issuer[0].not_valid_after_utc) if issuer else now + lifetime
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
    )


def _load_ca(files: TlsFiles) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    try:
        cert = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
        key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
    except (OSError, ValueError):
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        return None
    if cert.public_key() != key.public_key() or cert.not_valid_after_utc < _now() + RENEW_BEFORE:
        return None
    return cert, key


def _make_ca(files: TlsFiles, label: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _certificate(f"punto-banco local Kafka CA {label}", key, None, CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage("key_cert_sign", "crl_sign"), critical=True)
        .sign(key, hashes.SHA256())
    )
    write_private(files.ca_key, _pem(key))
    files.ca_cert.parent.mkdir(parents=True, exist_ok=True)
    temporary = files.ca_cert.with_suffix(".tmp")
    temporary.write_bytes(_pem(cert))
    temporary.chmod(0o644)
    temporary.replace(files.ca_cert)
    return cert, key


def broker_names(cert: x509.Certificate) -> set[str]:
    """The host names and addresses a certificate is valid for."""
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {str(name.value) for name in names}


def _broker_cert_is_good(files: TlsFiles, ca: x509.Certificate, hosts: Sequence[str]) -> bool:
    try:
        leaf = x509.load_pem_x509_certificates(files.broker_pem.read_bytes())[0]
        leaf.verify_directly_issued_by(ca)
    except (OSError, ValueError, TypeError, InvalidSignature):
        return False
    wanted = {str(_name(host).value) for host in hosts}
    return wanted <= broker_names(leaf) and leaf.not_valid_after_utc > _now() + RENEW_BEFORE


def _issue_broker_cert(
    files: TlsFiles, ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, hosts: Sequence[str]
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _certificate(hosts[0], key, (ca, ca_key), BROKER_LIFETIME)
        .add_extension(x509.SubjectAlternativeName([_name(host) for host in hosts]), False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage("digital_signature"), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    write_private(files.broker_pem, _pem(key) + _pem(cert) + _pem(ca))


def ensure_tls(home: Path, hosts: Sequence[str], label: str = "") -> TlsFiles:
    """The broker's TLS files under ``home``, made or renewed as needed (see the module doc).

    ``hosts``: every name or address clients may use to reach the TLS listener.
    """
    files = TlsFiles.under(home)
    private_folder(files.ca_key.parent)
    names = list(dict.fromkeys(hosts))
    loaded = _load_ca(files)
    if loaded is None:
        progress(f"making a certificate authority for Kafka's TLS listener: {files.ca_cert}")
        loaded = _make_ca(files, label or home.name)
    ca, ca_key = loaded
    if not _broker_cert_is_good(files, ca, names):
        progress(f"issuing the broker's TLS certificate for {', '.join(names)}")
        _issue_broker_cert(files, ca, ca_key, names)
    return files
