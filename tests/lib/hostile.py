"""A hostile HTTP/1.1 proxy in front of the emulator: a server that lies.

The emulator's own faults (503, 429, resets, truncation with an honest Content-Length, stalls)
are the failures of a server that means well. This proxy forwards every request to the emulator
and, when a rule matches, bends the reply the way a broken or lying server (or a middlebox)
would, so that the tests can check fluxfs never turns a lie into a wrong byte, a short file or a
hang:

=================  =========================================================================
lie                what the client gets
=================  =========================================================================
``repeat_token``   a list page whose ``nextPageToken`` is the token of its own request (the
                   same page forever); on a first page (no token) the token is left alone
``endless``        an empty list page with a new ``nextPageToken`` every time (answered by the
                   proxy, not forwarded): a listing that never ends
``nul_name``       a list page with one more item whose name holds a NUL (``\\u0000``)
``short_body``     a media reply cut to half its bytes with a matching ``Content-Length`` and
                   every other header left as it was (a clean, consistent, short reply)
``short_object``   a media reply that claims the object is half its size: status 200, half the
                   bytes, no ``Content-Range``, ``x-goog-stored-content-length`` and
                   ``x-goog-hash`` to match (only what the client already knew can tell)
``corrupt``        a media reply with one byte flipped (at ``arg`` bytes into the reply, or
                   the middle); headers untouched
``bad_reply``      no reply but a line of garbage (``HTTP/1.1 20x junk``), then the
                   connection closes: a connection out of step
``garbage_after``  the honest reply followed on the same keep-alive connection by the start of
                   a second, unrequested reply: the connection is out of step for the next
                   request sent on it, which gets a ``bad_reply``
``reset``          the connection closes before any reply
``deep_json``      the reply's body (any status) replaced by ``{"error": [[[...]]]}`` nested
                   ``arg`` levels deep (400,000 unless given): a tree parser that recurses
                   per level overflows its stack on it
=================  =========================================================================

Rules are tried in order; the first whose ``op`` matches (``list``, ``stat``, ``media``,
``write``, ``any``) and that has ``count`` left applies (``skip`` lets that many matching
requests through first). ``applied`` counts what was done, per lie.

Usage (in-process, one thread per connection)::

    with HostileProxy(emulator.url) as proxy:
        proxy.add("repeat_token", op="list", count=-1)
        Mount(proxy, "bucket")           # anything with a .url works as the endpoint

With ``tls=(certfile, keyfile)`` the proxy speaks HTTPS to its clients (HTTP/1.1, no ALPN) and
plain HTTP to the emulator: a TLS endpoint for the trust tests (see tests/lib/tls.py).

By hand: ``python -m tests.lib.hostile --upstream http://127.0.0.1:PORT --lie short_body:media``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass

LIES = ("repeat_token", "endless", "nul_name", "short_body", "short_object", "corrupt",
        "bad_reply",
        "garbage_after",
        "reset", "deep_json")
OPS = ("list", "stat", "media", "write", "any")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection",
              "te", "trailer", "upgrade"}
MAX_HEADER_BYTES = 64 * 1024
DEEP_JSON_LEVELS = 400_000


@dataclass
class Rule:
    lie: str
    op: str = "any"
    count: int = -1  # -1: forever
    skip: int = 0
    arg: int | None = None


def classify(method: str, target: str) -> str:
    """The kind of Cloud Storage call a request is: list, stat, media or write."""
    url = urllib.parse.urlsplit(target)
    query = urllib.parse.parse_qs(url.query)
    path = url.path
    if method in ("POST", "PUT", "PATCH", "DELETE"):
        return "write"
    if path.startswith("/storage/v1/b/"):
        rest = path[len("/storage/v1/b/"):].split("/")
        if len(rest) == 2 and rest[1] == "o":
            return "list"
        if len(rest) >= 3 and rest[1] == "o":
            return "media" if query.get("alt") == ["media"] else "stat"
        return "stat"
    if path.startswith("/download/storage/v1/"):
        return "media"
    if path.startswith("/_emulator/"):
        return "control"
    # XML API: GET /BUCKET/OBJECT is media, GET /BUCKET a list.
    parts = path.lstrip("/").split("/", 1)
    if len(parts) == 2 and parts[1]:
        return "media" if method in ("GET", "HEAD") else "write"
    return "list"


class HostileProxy:
    def __init__(self, upstream: str, host: str = "127.0.0.1", tls=None):
        up = urllib.parse.urlsplit(upstream)
        self.upstream_host = up.hostname
        self.upstream_port = up.port or 80
        self.rules: list[Rule] = []
        self.applied: dict[str, int] = {lie: 0 for lie in LIES}
        self.requests = 0
        self.connections = 0
        self._lock = threading.Lock()
        self._sock = socket.create_server((host, 0))
        self._sock.settimeout(0.2)
        self._tls = None
        if tls is not None:
            self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._tls.load_cert_chain(str(tls[0]), str(tls[1]))
        self.tls_failures = 0  # handshakes that failed (a client refusing the certificate)
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://{host}:{self._sock.getsockname()[1]}"
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accept_thread = threading.Thread(target=self._accept_loop, daemon=True,
                                               name="hostile-accept")
        self._accept_thread.start()

    # --- control ----------------------------------------------------------------------------

    def add(self, lie: str, op: str = "any", count: int = -1, skip: int = 0, arg=None):
        if lie not in LIES:
            raise ValueError(f"unknown lie {lie!r} (one of {LIES})")
        if op not in OPS:
            raise ValueError(f"unknown op {op!r} (one of {OPS})")
        with self._lock:
            self.rules.append(Rule(lie, op, count, skip, arg))

    def clear(self):
        """Drops every rule and zeroes ``applied``."""
        with self._lock:
            self.rules.clear()
            self.applied = {lie: 0 for lie in LIES}

    def _pick(self, kind: str) -> Rule | None:
        with self._lock:
            self.requests += 1
            for rule in self.rules:
                if rule.op not in ("any", kind) or rule.count == 0:
                    continue
                if rule.skip > 0:
                    rule.skip -= 1
                    continue
                if rule.count > 0:
                    rule.count -= 1
                self.applied[rule.lie] += 1
                return rule
        return None

    def close(self):
        self._stop.set()
        self._accept_thread.join(5)
        self._sock.close()
        for thread in list(self._threads):
            thread.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- serving ----------------------------------------------------------------------------

    def _accept_loop(self):
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True,
                                      name="hostile-conn")
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket):
        if self._tls is not None:
            conn.settimeout(10)
            try:
                conn = self._tls.wrap_socket(conn, server_side=True)
            except (OSError, ssl.SSLError):
                with self._lock:
                    self.tls_failures += 1
                conn.close()
                return
        conn.settimeout(0.5)
        reader = conn.makefile("rb")
        out_of_step = False
        try:
            while not self._stop.is_set():
                request = self._read_request(reader)
                if request is None:
                    return
                method, target, headers, body = request
                kind = classify(method, target)
                if out_of_step:
                    conn.sendall(b"HTTP/1.1 20x junk from an earlier reply\r\n\r\n")
                    return
                rule = self._pick(kind) if kind != "control" else None
                lie = rule.lie if rule else None
                if lie == "reset":
                    conn.shutdown(socket.SHUT_RDWR)
                    return
                if lie == "bad_reply":
                    conn.sendall(b"HTTP/1.1 20x junk\r\n\r\n")
                    return
                if lie == "endless":
                    status, reason = 200, "OK"
                    reply_headers = [("Content-Type", "application/json")]
                    reply_body = json.dumps({"kind": "storage#objects",
                                             "nextPageToken": f"endless-{time.monotonic_ns()}"
                                             }).encode()
                else:
                    status, reason, reply_headers, reply_body = self._forward(
                        method, target, headers, body)
                if rule is not None:
                    reply_body = self._bend(rule, kind, target, reply_body)
                if lie == "short_object" and 200 <= status < 300:
                    status, reason = 200, "OK"
                    drop = {"content-range", "x-goog-stored-content-length", "x-goog-hash"}
                    reply_headers = [(k, v) for k, v in reply_headers if k.lower() not in drop]
                    reply_headers.append(("x-goog-stored-content-length", str(len(reply_body))))
                head = [f"HTTP/1.1 {status} {reason}"]
                head += [f"{k}: {v}" for k, v in reply_headers
                         if k.lower() not in HOP_BY_HOP]
                head.append(f"Content-Length: {len(reply_body)}")
                data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
                if method != "HEAD":
                    data += reply_body
                if lie == "garbage_after":
                    data += b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n"
                    out_of_step = True
                conn.sendall(data)
        except (OSError, ValueError):
            return
        finally:
            try:
                reader.close()
                conn.close()
            except OSError:
                pass

    def _read_request(self, reader):
        line = None
        while line is None:
            try:
                line = reader.readline(MAX_HEADER_BYTES)
            except (TimeoutError, socket.timeout):
                if self._stop.is_set():
                    return None
                line = None
                continue
        if not line:
            return None
        parts = line.decode("latin-1").split()
        if len(parts) != 3:
            return None
        method, target, _ = parts
        headers = []
        while True:
            h = self._readline(reader)
            if h in (b"\r\n", b"\n", b""):
                break
            name, _, value = h.decode("latin-1").partition(":")
            headers.append((name.strip(), value.strip()))
        lower = {k.lower(): v for k, v in headers}
        body = b""
        if lower.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self._readline(reader).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self._readline(reader) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self._read_exact(reader, size))
                self._readline(reader)
            body = b"".join(chunks)
        elif "content-length" in lower:
            body = self._read_exact(reader, int(lower["content-length"]))
        return method, target, headers, body

    def _readline(self, reader):
        deadline = time.monotonic() + 30
        while True:
            try:
                return reader.readline(MAX_HEADER_BYTES)
            except (TimeoutError, socket.timeout):
                if time.monotonic() > deadline or self._stop.is_set():
                    raise OSError("client too slow") from None

    def _read_exact(self, reader, n):
        chunks, left = [], n
        deadline = time.monotonic() + 60
        while left > 0:
            try:
                chunk = reader.read(left)
            except (TimeoutError, socket.timeout):
                if time.monotonic() > deadline or self._stop.is_set():
                    raise OSError("client too slow") from None
                continue
            if not chunk:
                raise OSError("client closed mid-body")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _forward(self, method, target, headers, body):
        upstream = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=120)
        try:
            send_headers = {k: v for k, v in headers
                            if k.lower() not in HOP_BY_HOP and k.lower() != "expect"}
            send_headers["Content-Length"] = str(len(body))
            upstream.request(method, target, body=body if body else None, headers=send_headers)
            response = upstream.getresponse()
            reply_body = response.read()
            return response.status, response.reason, response.getheaders(), reply_body
        finally:
            upstream.close()

    # --- the lies on a forwarded reply -------------------------------------------------------

    def _bend(self, rule: Rule, kind: str, target: str, body: bytes) -> bytes:
        if rule.lie in ("repeat_token", "nul_name"):
            try:
                doc = json.loads(body)
            except ValueError:
                return body
            if not isinstance(doc, dict):
                return body
            if rule.lie == "repeat_token":
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)
                token = query.get("pageToken", [None])[0]
                if token:
                    doc["nextPageToken"] = token
            else:
                items = doc.setdefault("items", [])
                template = dict(items[0]) if items else {"size": "1", "generation": "1"}
                prefix = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query).get(
                    "prefix", [""])[0]
                template["name"] = prefix + "bad\u0000name"
                items.insert(0, template)
            return json.dumps(doc).encode()
        if rule.lie == "deep_json":
            levels = rule.arg if rule.arg is not None else DEEP_JSON_LEVELS
            return b'{"error":' + b"[" * levels + b"]" * levels + b"}"
        if rule.lie in ("short_body", "short_object"):
            return body[: len(body) // 2]
        if rule.lie == "corrupt" and body:
            at = rule.arg if rule.arg is not None else len(body) // 2
            at = min(max(at, 0), len(body) - 1)
            return body[:at] + bytes([body[at] ^ 0x5A]) + body[at + 1:]
        return body


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="the emulator's URL")
    parser.add_argument("--lie", action="append", default=[],
                        help="LIE[:OP[:COUNT]] (repeatable), e.g. short_body:media:3")
    args = parser.parse_args(argv)
    proxy = HostileProxy(args.upstream)
    for spec in args.lie:
        fields = spec.split(":")
        proxy.add(fields[0], fields[1] if len(fields) > 1 else "any",
                  int(fields[2]) if len(fields) > 2 else -1)
    print(proxy.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        proxy.close()


if __name__ == "__main__":
    main()
