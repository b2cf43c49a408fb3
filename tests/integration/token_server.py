"""A tiny OAuth token endpoint for auth tests: it checks credentials the way Google's does.

* ``POST /token`` with ``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=JWT``:
  the JWT's RS256 signature is verified against the public half of the test's key, and its
  header (alg, typ, kid) and claims (iss, scope, aud = this URL, iat/exp) are checked.
* ``POST /token`` with ``grant_type=refresh_token`` and client_id/client_secret/refresh_token.
* ``GET /computeMetadata/v1/instance/service-accounts/default/token`` with
  ``Metadata-Flavor: Google`` (a metadata server, for GCE_METADATA_HOST).

Accepted requests get ``{"access_token": TOKEN, "expires_in": N, "token_type": "Bearer"}``;
rejected ones 400 ``{"error": "invalid_grant", "error_description": ...}`` as Google answers.
Counters: ``server.issued``, ``server.rejected``, ``server.reasons``.

Run inside a test (``with TokenServer(public_key_pem, ...) as server: server.url``) or from a
shell: ``python token_server.py --public-key key.pub --token T --email E`` (prints its URL).
"""

from __future__ import annotations

import argparse
import base64
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
STORAGE_SCOPES = ("https://www.googleapis.com/auth/devstorage.full_control",
                  "https://www.googleapis.com/auth/devstorage.read_write",
                  "https://www.googleapis.com/auth/devstorage.read_only",
                  "https://www.googleapis.com/auth/cloud-platform")


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenServer:
    def __init__(self, public_key_pem: bytes | None = None, *, token: str = "test-token",
                 client_email: str = "fluxfs-test@test.iam.gserviceaccount.com",
                 key_id: str | None = None, expires_in: int = 3600,
                 refresh_client: tuple[str, str, str] | None = None):
        self.public_key = (serialization.load_pem_public_key(public_key_pem)
                           if public_key_pem else None)
        self.token = token
        self.client_email = client_email
        self.key_id = key_id
        self.expires_in = expires_in
        self.refresh_client = refresh_client  # (client_id, client_secret, refresh_token)
        self.deep_levels = 0  # > 0: every reply is {"error": [[[...]]]} nested this deep
        self.issued = 0
        self.rejected = 0
        self.reasons: list[str] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self.host = f"127.0.0.1:{self._httpd.server_address[1]}"
        self.url = f"http://{self.host}/token"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self):
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- checks -----------------------------------------------------------------------------

    def check_jwt(self, assertion: str) -> str | None:
        """Returns None when the JWT is acceptable, else the reason."""
        if self.public_key is None:
            return "no service account configured"
        parts = assertion.split(".")
        if len(parts) != 3:
            return "not a JWT"
        try:
            header = json.loads(_b64url_decode(parts[0]))
            claims = json.loads(_b64url_decode(parts[1]))
            signature = _b64url_decode(parts[2])
        except ValueError:
            return "undecodable JWT"
        if header.get("alg") != "RS256" or header.get("typ") != "JWT":
            return f"bad header {header}"
        if self.key_id is not None and header.get("kid") != self.key_id:
            return f"bad kid {header.get('kid')!r}"
        try:
            self.public_key.verify(signature, f"{parts[0]}.{parts[1]}".encode(),
                                   padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature:
            return "Invalid JWT Signature."
        now = time.time()
        if claims.get("iss") != self.client_email:
            return f"bad iss {claims.get('iss')!r}"
        if claims.get("aud") != self.url:
            return f"bad aud {claims.get('aud')!r} (expected {self.url})"
        if not any(s in STORAGE_SCOPES for s in str(claims.get("scope", "")).split()):
            return f"bad scope {claims.get('scope')!r}"
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, int) or not isinstance(exp, int):
            return "iat/exp missing"
        if iat > now + 300 or exp < now or exp - iat > 3600:
            return f"bad times iat={iat} exp={exp} now={int(now)}"
        return None

    def check_refresh(self, form: dict) -> str | None:
        if self.refresh_client is None:
            return "no authorized user configured"
        client_id, secret, refresh = self.refresh_client
        if (form.get("client_id"), form.get("client_secret"), form.get("refresh_token")) != (
                client_id, secret, refresh):
            return "Bad Request: unknown client or refresh token"
        return None

    def _count(self, reason: str | None):
        with self._lock:
            if reason is None:
                self.issued += 1
            else:
                self.rejected += 1
                self.reasons.append(reason)

    # --- HTTP -------------------------------------------------------------------------------

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _reply(self, status: int, payload: dict):
                body = json.dumps(payload).encode()
                if server.deep_levels > 0:  # a hostile server: a stack overflow for a
                    levels = server.deep_levels  # recursive JSON parser
                    body = b'{"error":' + b"[" * levels + b"]" * levels + b"}"
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _grant(self, reason: str | None):
                server._count(reason)
                if reason is None:
                    self._reply(200, {"access_token": server.token,
                                      "expires_in": server.expires_in, "token_type": "Bearer"})
                else:
                    self._reply(400, {"error": "invalid_grant", "error_description": reason})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode()
                if self.path != "/token":
                    return self._reply(404, {"error": "not_found"})
                if self.headers.get("Content-Type", "").split(";")[0] != \
                        "application/x-www-form-urlencoded":
                    return self._grant("bad content type")
                form = {k: v[0] for k, v in urllib.parse.parse_qs(body).items()}
                grant = form.get("grant_type")
                if grant == JWT_BEARER:
                    return self._grant(server.check_jwt(form.get("assertion", "")))
                if grant == "refresh_token":
                    return self._grant(server.check_refresh(form))
                return self._grant(f"unsupported grant_type {grant!r}")

            def do_GET(self):
                if self.path.split("?")[0] != \
                        "/computeMetadata/v1/instance/service-accounts/default/token":
                    return self._reply(404, {"error": "not_found"})
                if self.headers.get("Metadata-Flavor") != "Google":
                    server._count("missing Metadata-Flavor")
                    return self._reply(403, {"error": "missing Metadata-Flavor header"})
                self._grant(None)

        return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--public-key", help="PEM public key of the service account")
    parser.add_argument("--token", default="test-token")
    parser.add_argument("--email", default="fluxfs-test@test.iam.gserviceaccount.com")
    parser.add_argument("--expires-in", type=int, default=3600)
    args = parser.parse_args()
    pem = open(args.public_key, "rb").read() if args.public_key else None
    server = TokenServer(pem, token=args.token, client_email=args.email,
                         expires_in=args.expires_in)
    print(server.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.close()


if __name__ == "__main__":
    main()
