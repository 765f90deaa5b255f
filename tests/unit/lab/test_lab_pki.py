"""The lab CA, per-BMC certificates, BMC passwords and SSH key."""

from __future__ import annotations

import ipaddress
import stat

import bcrypt
from cryptography import x509
from netaddr import IPAddress

from provisioner.lab import pki
from provisioner.secrets import Secret


def test_bmc_certificate_is_issued_by_the_lab_ca_for_the_bmc_address(tmp_path):
    ca_cert, ca_key = pki.ensure_ca(tmp_path / "pki", "plabt")
    cert_path, key_path = pki.ensure_server_cert(
        tmp_path / "bmc-01", ca_cert, ca_key, "lab-host01-bmc", IPAddress("198.19.0.11")
    )
    ca = x509.load_pem_x509_certificate(ca_cert.read_bytes())
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    cert.verify_directly_issued_by(ca)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("198.19.0.11") in san.get_values_for_type(x509.IPAddress)
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(ca_key.stat().st_mode) == 0o600


def test_ca_and_certificates_are_kept_on_a_second_run_and_reissued_for_a_new_address(tmp_path):
    ca_cert, ca_key = pki.ensure_ca(tmp_path, "plabt")
    first = ca_cert.read_bytes()
    assert pki.ensure_ca(tmp_path, "plabt") == (ca_cert, ca_key)
    assert ca_cert.read_bytes() == first
    out = tmp_path / "bmc"
    cert, _ = pki.ensure_server_cert(out, ca_cert, ca_key, "h", IPAddress("198.19.0.11"))
    issued = cert.read_bytes()
    pki.ensure_server_cert(out, ca_cert, ca_key, "h", IPAddress("198.19.0.11"))
    assert cert.read_bytes() == issued
    pki.ensure_server_cert(out, ca_cert, ca_key, "h", IPAddress("198.19.0.12"))
    assert cert.read_bytes() != issued


def test_passwords_are_random_private_and_stable(tmp_path):
    a = pki.ensure_password(tmp_path / "bmc-01.password")
    b = pki.ensure_password(tmp_path / "bmc-02.password")
    assert a != b and len(a.reveal()) >= 20
    assert pki.ensure_password(tmp_path / "bmc-01.password") == a
    assert stat.S_IMODE((tmp_path / "bmc-01.password").stat().st_mode) == 0o600
    assert "***" in repr(a) and a.reveal() not in repr(a)


def test_htpasswd_holds_a_bcrypt_entry_sushy_accepts(tmp_path):
    path = tmp_path / "htpasswd"
    secret = Secret("s3cret-pass")
    pki.write_htpasswd(path, "admin", secret)
    user, digest = path.read_text().strip().split(":", 1)
    assert user == "admin" and digest.startswith("$2")
    assert bcrypt.checkpw(b"s3cret-pass", digest.encode())
    assert "s3cret-pass" not in path.read_text()
    assert pki.htpasswd_matches(path, "admin", secret)
    assert not pki.htpasswd_matches(path, "admin", Secret("other"))
    assert not pki.htpasswd_matches(path, "root", secret)
    assert not pki.htpasswd_matches(tmp_path / "missing", "admin", secret)


def test_ssh_key_is_generated_once(tmp_path):
    priv, pub = pki.ensure_ssh_key(tmp_path, "provisioner-lab-t")
    assert pub.startswith("ssh-ed25519 ") and pub.endswith(" provisioner-lab-t")
    assert priv.read_text().startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert stat.S_IMODE(priv.stat().st_mode) == 0o600
    assert pki.ensure_ssh_key(tmp_path, "other") == (priv, pub)
