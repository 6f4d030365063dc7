"""A folder served over real https on 127.0.0.1 (Python's http.server behind TLS), with a certificate made for the
test: what a bucket's https endpoint is to the module cache. Requests are recorded; `status` forces an answer per
path suffix (403 as S3 gives for a missing object to a reader without list permission), `redirect` a 302."""

from __future__ import annotations

import datetime
import functools
import http.server
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (PEM files); the certificate is also the CA to trust."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpunode test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@dataclass
class Served:
    url: str
    ca_file: Path
    requests: list[str] = field(default_factory=list)
    status: dict[str, int] = field(default_factory=dict)
    redirect: dict[str, str] = field(default_factory=dict)  # path suffix -> Location of a 302


@contextmanager
def https_folder(root: Path, certs: Path) -> Iterator[Served]:
    """Serve `root` at https://127.0.0.1:PORT/ until the block ends."""
    cert_file, key_file = make_certificate(certs)
    served = Served("", cert_file)

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            served.requests.append(self.path)
            moved = next((to for suffix, to in served.redirect.items() if self.path.endswith(suffix)), None)
            if moved:
                self.send_response(302)
                self.send_header("Location", moved)
                self.end_headers()
                return
            forced = next((code for suffix, code in served.status.items() if self.path.endswith(suffix)), None)
            if forced:
                self.send_error(forced)
                return
            super().do_GET()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    served.url = f"https://127.0.0.1:{server.server_address[1]}/modules"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
