"""The lab's own certificate authority, per-BMC TLS certificates, BMC passwords and SSH key.

Real BMCs present certificates the operator must trust explicitly; the lab mirrors that with
a CA of its own (written beside the site file as ca.pem) so clients verify TLS for real.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import secrets
from pathlib import Path

import bcrypt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from netaddr import IPAddress

from provisioner.secrets import Secret

_VALID_DAYS = 825


def _write_private(path: Path, data: bytes) -> None:
    """Write a key or password readable by root only (created 0600, never world-readable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _load_key(path: Path) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{path} does not hold an EC private key")
    return key


def ensure_ca(pki_dir: Path, name: str) -> tuple[Path, Path]:
    """Create the lab CA once (key + self-signed cert); return (cert, key) paths."""
    cert_path, key_path = pki_dir / "ca.pem", pki_dir / "ca.key"
    if cert_path.exists() and key_path.exists():
        return cert_path, key_path
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"provisioner lab CA ({name})")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=_VALID_DAYS))
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
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_private(
        key_path,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def ensure_server_cert(
    out_dir: Path, ca_cert: Path, ca_key: Path, common_name: str, address: IPAddress
) -> tuple[Path, Path]:
    """Issue (once) a TLS server certificate for a BMC address, signed by the lab CA."""
    cert_path, key_path = out_dir / "tls.pem", out_dir / "tls.key"
    if cert_path.exists() and key_path.exists() and _cert_matches(cert_path, ca_cert, address):
        return cert_path, key_path
    ca = x509.load_pem_x509_certificate(ca_cert.read_bytes())
    signer = _load_key(ca_key)
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=_VALID_DAYS))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address(str(address))), x509.DNSName(common_name)]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()),
            critical=False,
        )
        .sign(signer, hashes.SHA256())
    )
    _write_private(
        key_path,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def _cert_matches(cert_path: Path, ca_cert: Path, address: IPAddress) -> bool:
    """Whether an existing certificate was issued by this CA for this address."""
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        ca = x509.load_pem_x509_certificate(ca_cert.read_bytes())
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return False
    ips = san.get_values_for_type(x509.IPAddress)
    return cert.issuer == ca.subject and ipaddress.ip_address(str(address)) in ips


def ensure_password(path: Path) -> Secret:
    """Read the BMC password stored at ``path``, generating a random one the first time."""
    if path.exists():
        value = path.read_text().strip()
        if value:
            return Secret(value)
    value = secrets.token_urlsafe(18)
    _write_private(path, (value + "\n").encode())
    return Secret(value)


def write_htpasswd(path: Path, username: str, password: Secret) -> None:
    """Write an htpasswd file with one bcrypt entry (the only hash sushy-emulator accepts)."""
    digest = bcrypt.hashpw(password.reveal().encode(), bcrypt.gensalt(rounds=6)).decode()
    _write_private(path, f"{username}:{digest}\n".encode())


def htpasswd_matches(path: Path, username: str, password: Secret) -> bool:
    """Whether the htpasswd file already holds ``username`` with ``password``."""
    try:
        user, digest = path.read_text().strip().split(":", 1)
    except (OSError, ValueError):
        return False
    return user == username and bcrypt.checkpw(password.reveal().encode(), digest.encode())


def ensure_ssh_key(ssh_dir: Path, comment: str) -> tuple[Path, str]:
    """Create (once) the lab's ed25519 SSH key; return (private key path, public key line)."""
    priv_path, pub_path = ssh_dir / "id_ed25519", ssh_dir / "id_ed25519.pub"
    if priv_path.exists() and pub_path.exists():
        return priv_path, pub_path.read_text().strip()
    key = ed25519.Ed25519PrivateKey.generate()
    _write_private(
        priv_path,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        ),
    )
    pub = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    line = f"{pub.decode()} {comment}"
    pub_path.write_text(line + "\n")
    return priv_path, line
