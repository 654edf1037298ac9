"""Certificates made for a test with the ``openssl`` command: a CA, and certificates it signs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command")


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(folder: Path, name: str = "ca") -> tuple[Path, Path, Path]:
    """A self-signed CA in ``folder``: (certificate, key, folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
        "-days", "1", "-subj", f"/CN=Paperclip test {name}",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )
    return cert, key, folder


def issue(ca: tuple[Path, Path, Path], name: str, *, server: bool) -> tuple[Path, Path]:
    """A certificate signed by ``ca``: for 127.0.0.1 (a server) or a client; (certificate, key)."""
    ca_cert, ca_key, folder = ca
    cert, key, csr, ext = (folder / f"{name}{s}" for s in (".pem", ".key", ".csr", ".ext"))
    usage = "serverAuth" if server else "clientAuth"
    ext.write_text(
        f"extendedKeyUsage={usage}\n" + ("subjectAltName=IP:127.0.0.1,DNS:localhost\n" if server else "")
    )
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}")
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key), "-CAcreateserial",
        "-out", str(cert), "-days", "1", "-extfile", str(ext),
    )
    return cert, key
