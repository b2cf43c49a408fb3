"""Direct reads of the emulator's bucket for the stress test: not through the mount, so what it
sees is what Cloud Storage would hold. Plain urllib on 127.0.0.1, one request per call, retried
on the faults the stress test injects (503, 429) and on connection errors, a bounded number of
times. Any thread or process may use it (nothing is shared)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

ATTEMPTS = 60           # 503/429 at a few percent: 60 tries never all fail unless it is broken
RETRY_SLEEP_S = 0.05
TIMEOUT_S = 60


class BucketError(RuntimeError):
    pass


class BucketClient:
    def __init__(self, url: str, bucket: str):
        self.url = url.rstrip("/")
        self.bucket = bucket

    def _get(self, path: str, query: dict | None = None, *, missing_ok=False) -> bytes | None:
        target = self.url + path
        if query:
            target += "?" + urllib.parse.urlencode(query)
        last = None
        for attempt in range(ATTEMPTS):
            try:
                with urllib.request.urlopen(target, timeout=TIMEOUT_S) as reply:
                    return reply.read()
            except urllib.error.HTTPError as e:
                e.read()
                if e.code == 404 and missing_ok:
                    return None
                if e.code not in (408, 429, 500, 502, 503, 504):
                    raise BucketError(f"GET {target}: HTTP {e.code}") from None
                last = f"HTTP {e.code}"
            except (urllib.error.URLError, OSError) as e:
                last = repr(e)
            time.sleep(min(RETRY_SLEEP_S * (attempt + 1), 0.5))
        raise BucketError(f"GET {target}: still failing after {ATTEMPTS} attempts ({last})")

    def _object_path(self, name: str) -> str:
        return f"/storage/v1/b/{self.bucket}/o/{urllib.parse.quote(name, safe='')}"

    def stat(self, name: str) -> dict | None:
        body = self._get(self._object_path(name), missing_ok=True)
        return None if body is None else json.loads(body)

    def download(self, name: str, generation) -> bytes | None:
        """The bytes of that generation; None when it is gone (replaced or deleted)."""
        return self._get(self._object_path(name), {"alt": "media", "generation": generation},
                         missing_ok=True)

    def list(self, prefix: str = "") -> list[dict]:
        items, token = [], None
        while True:
            query = {"prefix": prefix, "maxResults": 1000}
            if token:
                query["pageToken"] = token
            page = json.loads(self._get(f"/storage/v1/b/{self.bucket}/o", query))
            items += page.get("items", [])
            token = page.get("nextPageToken")
            if not token:
                return items

    def open_multipart_uploads(self) -> list[str]:
        doc = ET.fromstring(self._get(f"/{self.bucket}?uploads"))
        keys = []
        for el in doc.iter():
            if el.tag.split("}")[-1] == "Upload":
                key = next((c.text for c in el if c.tag.split("}")[-1] == "Key"), "?")
                keys.append(key)
        return keys

    def create_bucket(self):
        req = urllib.request.Request(f"{self.url}/storage/v1/b?project=fluxfs-stress",
                                     data=json.dumps({"name": self.bucket}).encode(),
                                     method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as reply:
            reply.read()
