"""One scripted call sequence, run against several Cloud Storage servers, observed the same way.

Each step makes one call (Google's Python client or raw HTTP) and reduces the answer to a small
"observation" that does not depend on the server's identity (no generations, timestamps, URLs
or bucket names): status codes, sizes, checksums, names, counts. Each step also states what
Cloud Storage documents for that call (``expect``). Running the sequence against gcs-emulator
and fake-gcs-server shows where each one follows Cloud Storage and where it does not.

    .venv/bin/python -m tests.fidelity.compare_calls            # markdown table on stdout

tests/fidelity/test_fake_gcs_compare.py runs it as a test; tests/emulator/README.md records
the differences and explains them.
"""

from __future__ import annotations

import io
import tempfile
import traceback
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any, Callable

import requests

from tests.fidelity.common import KiB, MiB, crc32c_b64, md5_b64, payload, qname, xml_path

NOT_FOUND = {"status": 404, "reason": "notFound"}


@dataclass
class Ctx:
    url: str
    client: Any
    bucket: str
    state: dict = field(default_factory=dict)

    @property
    def b(self):
        return self.client.bucket(self.bucket)

    def json_url(self, name=None, suffix=""):
        base = f"{self.url}/storage/v1/b/{self.bucket}/o"
        return base + (f"/{qname(name)}" if name is not None else "") + suffix

    def upload_url(self):
        return f"{self.url}/upload/storage/v1/b/{self.bucket}/o"

    def xml_url(self, name):
        return f"{self.url}/{self.bucket}/{xml_path(name)}"

    def gen(self, name):
        return int(requests.get(self.json_url(name)).json()["generation"])


@dataclass
class Step:
    name: str
    call: str          # the call, in words, for the README table
    fn: Callable[[Ctx], Any]
    expect: Any        # what Cloud Storage documents / does


STEPS: list[Step] = []


def step(name, call, expect):
    def deco(fn):
        STEPS.append(Step(name, call, fn, expect))
        return fn
    return deco


def error_reason(r):
    try:
        errors = r.json()["error"].get("errors", [])
        return errors[0].get("reason") if errors else None
    except Exception:  # noqa: BLE001 - not a JSON error body
        return "<no JSON error body>"


def put(ctx, name, data, **params):
    r = requests.post(ctx.upload_url(), params={"uploadType": "media", "name": name, **params},
                      data=data)
    return r


def status_of(fn):
    """Runs a client call; returns 200 or the HTTP status of the exception it raised."""
    try:
        fn()
        return 200
    except Exception as e:  # noqa: BLE001
        code = getattr(e, "code", None)
        if code is None and hasattr(e, "response"):
            code = getattr(e.response, "status_code", None)
        return int(code) if code is not None else type(e).__name__


# --------------------------------------------------------------------------------------------
# The sequence
# --------------------------------------------------------------------------------------------


@step("bucket.insert", "client.create_bucket(B)", 200)
def _(ctx):
    return status_of(lambda: ctx.client.create_bucket(ctx.bucket))


@step("bucket.insert.duplicate", "client.create_bucket(B) again", 409)
def _(ctx):
    return status_of(lambda: ctx.client.create_bucket(ctx.bucket))


@step("bucket.testIamPermissions", "bucket.test_iam_permissions([get, create])",
      ["storage.objects.create", "storage.objects.get"])
def _(ctx):
    try:
        return sorted(ctx.b.test_iam_permissions(["storage.objects.get",
                                                   "storage.objects.create"]))
    except Exception as e:  # noqa: BLE001
        return f"error {getattr(e, 'code', type(e).__name__)}"


@step("upload.multipart", "blob.upload_from_string(5000 B) then reload",
      {"size": 5000, "crc32c": crc32c_b64(payload(5000, 1)), "md5": md5_b64(payload(5000, 1)),
       "metageneration": 1})
def _(ctx):
    blob = ctx.b.blob("a/1")
    blob.upload_from_string(payload(5000, 1))
    blob.reload()
    return {"size": blob.size, "crc32c": blob.crc32c, "md5": blob.md5_hash,
            "metageneration": blob.metageneration}


@step("upload.resumable.client", "blob.chunk_size=256 KiB; upload_from_file(1 MiB + 5)",
      {"ok": True, "crc32c": crc32c_b64(payload(MiB + 5, 2))})
def _(ctx):
    blob = ctx.b.blob("a/2")
    blob.chunk_size = 256 * KiB
    data = payload(MiB + 5, 2)
    blob.upload_from_file(io.BytesIO(data))
    blob.reload()
    return {"ok": blob.download_as_bytes() == data, "crc32c": blob.crc32c}


@step("setup.objects", "media uploads of b, c/d/e, dir/, dir/x, n00..n09", "ok")
def _(ctx):
    names = ["b", "c/d/e", "dir/", "dir/x"] + [f"n{i:02d}" for i in range(10)]
    codes = {put(ctx, n, n.encode()).status_code for n in names}
    return "ok" if codes == {200} else sorted(codes)


@step("list.delimiter.paged", "objects.list delimiter=/ maxResults=2, page by page",
      [[["a/"], ["b"]], [["c/", "dir/"], []], [[], ["n00", "n01"]]])
def _(ctx):
    # Items and prefixes count together toward maxResults; the merged sequence is in order.
    pages, token = [], None
    while True:
        params = {"delimiter": "/", "maxResults": 2}
        if token:
            params["pageToken"] = token
        j = requests.get(ctx.json_url(), params=params).json()
        pages.append([j.get("prefixes", []), [i["name"] for i in j.get("items", [])]])
        token = j.get("nextPageToken")
        if not token or len(pages) >= 3:
            return pages


@step("list.delimiter.all", "client.list_blobs(delimiter=/), all pages",
      {"items": ["b"] + [f"n{i:02d}" for i in range(10)], "prefixes": ["a/", "c/", "dir/"]})
def _(ctx):
    it = ctx.client.list_blobs(ctx.bucket, delimiter="/", page_size=3)
    items = [b.name for b in it]
    return {"items": items, "prefixes": sorted(it.prefixes)}


@step("list.includeTrailingDelimiter", "objects.list delimiter=/ includeTrailingDelimiter=true",
      {"items": ["b", "dir/"], "prefixes": ["a/", "c/", "dir/"]})
def _(ctx):
    j = requests.get(ctx.json_url(), params={"delimiter": "/", "includeTrailingDelimiter": "true",
                                             "endOffset": "n"}).json()
    return {"items": [i["name"] for i in j.get("items", [])],
            "prefixes": sorted(j.get("prefixes", []))}


@step("list.offsets", "objects.list startOffset=n03 endOffset=n06 maxResults=2 (all pages)",
      ["n03", "n04", "n05"])
def _(ctx):
    return [b.name for b in ctx.client.list_blobs(ctx.bucket, start_offset="n03",
                                                  end_offset="n06", page_size=2)]


@step("list.multichar_delimiter", "objects.list prefix=c/ delimiter=d/",
      {"prefixes": ["c/d/"], "items": []})
def _(ctx):
    j = requests.get(ctx.json_url(), params={"prefix": "c/", "delimiter": "d/"}).json()
    return {"prefixes": j.get("prefixes", []), "items": [i["name"] for i in j.get("items", [])]}


@step("get.ifGenerationNotMatch.current", "GET object metadata ifGenerationNotMatch=<current>",
      304)
def _(ctx):
    return requests.get(ctx.json_url("b"), params={"ifGenerationNotMatch": ctx.gen("b")}
                        ).status_code


@step("get.ifGenerationMatch.wrong", "GET object metadata ifGenerationMatch=<other>", 412)
def _(ctx):
    return requests.get(ctx.json_url("b"), params={"ifGenerationMatch": ctx.gen("b") + 1}
                        ).status_code


@step("media.range", "GET alt=media Range: bytes=1-3 of 'n05'",
      {"status": 206, "body": "05", "content_range": "bytes 1-2/3"})
def _(ctx):
    r = requests.get(ctx.json_url("n05"), params={"alt": "media"}, headers={"Range": "bytes=1-3"})
    return {"status": r.status_code, "body": r.text, "content_range": r.headers.get("Content-Range")}


@step("media.range.unsatisfiable", "GET alt=media Range: bytes=10-20 of a 3-byte object", 416)
def _(ctx):
    return requests.get(ctx.json_url("n05"), params={"alt": "media"},
                        headers={"Range": "bytes=10-20"}).status_code


@step("media.range.malformed", "GET alt=media Range: bytes=abc", {"status": 200, "body": "n05"})
def _(ctx):
    r = requests.get(ctx.json_url("n05"), params={"alt": "media"}, headers={"Range": "bytes=abc"})
    return {"status": r.status_code, "body": r.text}


@step("media.headers", "GET alt=media: x-goog-generation/-metageneration/-hash present",
      {"x-goog-generation": True, "x-goog-metageneration": True, "x-goog-hash": True})
def _(ctx):
    r = requests.get(ctx.json_url("b"), params={"alt": "media"})
    return {h: h in r.headers for h in ("x-goog-generation", "x-goog-metageneration",
                                        "x-goog-hash")}


@step("patch.metadata", "blob.metadata={k: v}; blob.patch()", {"metageneration": 2})
def _(ctx):
    blob = ctx.b.blob("b")
    blob.metadata = {"k": "v"}
    blob.patch()
    return {"metageneration": blob.metageneration}


@step("patch.ifMetagenerationMatch.wrong", "PATCH ifMetagenerationMatch=99", 412)
def _(ctx):
    return requests.patch(ctx.json_url("b"), params={"ifMetagenerationMatch": 99},
                          json={"metadata": {"x": "y"}}).status_code


@step("upload.ifGenerationMatch=0.existing", "media upload ifGenerationMatch=0 over 'b'", 412)
def _(ctx):
    return put(ctx, "b", b"new", ifGenerationMatch=0).status_code


@step("compose", "compose [n01, n02] -> comp",
      {"body": "n01n02", "componentCount": 2, "crc32c": crc32c_b64(b"n01n02"), "md5": None})
def _(ctx):
    dest = ctx.b.blob("comp")
    dest.compose([ctx.b.blob("n01"), ctx.b.blob("n02")])
    dest.reload()
    return {"body": dest.download_as_bytes().decode(), "componentCount": dest.component_count,
            "crc32c": dest.crc32c, "md5": dest.md5_hash}


@step("compose.ifGenerationMatch=0.existing", "compose -> existing 'comp' ifGenerationMatch=0",
      412)
def _(ctx):
    return requests.post(ctx.json_url("comp", "/compose"), params={"ifGenerationMatch": 0},
                         json={"sourceObjects": [{"name": "n01"}]}).status_code


@step("compose.source.ifGenerationMatch.wrong", "compose with sourceObjects[0]."
      "objectPreconditions.ifGenerationMatch=<other>", 412)
def _(ctx):
    body = {"sourceObjects": [{"name": "n01", "objectPreconditions": {
        "ifGenerationMatch": str(ctx.gen("n01") + 1)}}]}
    return requests.post(ctx.json_url("comp2", "/compose"), json=body).status_code


@step("compose.33", "compose of 33 sources", 400)
def _(ctx):
    body = {"sourceObjects": [{"name": "n01"}] * 33}
    return requests.post(ctx.json_url("comp33", "/compose"), json=body).status_code


@step("compose.missing_source", "compose with a missing source", 404)
def _(ctx):
    return requests.post(ctx.json_url("comp4", "/compose"),
                         json={"sourceObjects": [{"name": "missing"}]}).status_code


@step("copy", "bucket.copy_blob(n03 -> copied)", {"body": "n03", "md5": md5_b64(b"n03")})
def _(ctx):
    ctx.b.copy_blob(ctx.b.blob("n03"), ctx.b, "copied")
    blob = ctx.b.get_blob("copied")
    return {"body": blob.download_as_bytes().decode(), "md5": blob.md5_hash}


@step("copy.ifGenerationMatch=0.existing", "copy_blob(n03 -> existing 'copied', "
      "if_generation_match=0)", 412)
def _(ctx):
    return status_of(lambda: ctx.b.copy_blob(ctx.b.blob("n03"), ctx.b, "copied",
                                             if_generation_match=0))


@step("copy.ifSourceGenerationMatch.wrong", "copy_blob(if_source_generation_match=<other>)", 412)
def _(ctx):
    return status_of(lambda: ctx.b.copy_blob(ctx.b.blob("n03"), ctx.b, "copied2",
                                             if_source_generation_match=ctx.gen("n03") + 1))


@step("rewrite", "blob.rewrite(n04) until done", {"done": True, "body": "n04"})
def _(ctx):
    dest = ctx.b.blob("rewritten")
    token, _, _ = dest.rewrite(ctx.b.blob("n04"))
    while token:
        token, _, _ = dest.rewrite(ctx.b.blob("n04"), token=token)
    return {"done": True, "body": dest.download_as_bytes().decode()}


@step("rewrite.ifGenerationMatch=0.existing", "rewrite(n04 -> existing, if_generation_match=0)",
      412)
def _(ctx):
    return status_of(lambda: ctx.b.blob("rewritten").rewrite(ctx.b.blob("n04"),
                                                             if_generation_match=0))


@step("delete.ifGenerationMatch.wrong", "DELETE n06 ifGenerationMatch=<other>",
      {"status": 412, "still_there": True})
def _(ctx):
    r = requests.delete(ctx.json_url("n06"), params={"ifGenerationMatch": ctx.gen("n06") + 1})
    return {"status": r.status_code,
            "still_there": requests.get(ctx.json_url("n06")).status_code == 200}


@step("delete", "DELETE n06, then GET", {"delete": 204, "get": NOT_FOUND})
def _(ctx):
    d = requests.delete(ctx.json_url("n06")).status_code
    g = requests.get(ctx.json_url("n06"))
    return {"delete": d, "get": {"status": g.status_code, "reason": error_reason(g)}}


@step("resumable.chunk", "resumable: initiate, PUT 256 KiB 'bytes 0-262143/*'",
      {"status": 308, "range": "bytes=0-262143"})
def _(ctx):
    r = requests.post(ctx.upload_url(), params={"uploadType": "resumable", "name": "res"},
                      json={})
    ctx.state["session"] = r.headers.get("Location")
    r = requests.put(ctx.state["session"], data=payload(256 * KiB, 3),
                     headers={"Content-Range": f"bytes 0-{256 * KiB - 1}/*"})
    return {"status": r.status_code, "range": r.headers.get("Range")}


@step("resumable.status_query", "PUT 'bytes */*' (status query), then GET the object",
      {"status": 308, "range": "bytes=0-262143", "object": 404})
def _(ctx):
    r = requests.put(ctx.state["session"], headers={"Content-Range": "bytes */*"})
    return {"status": r.status_code, "range": r.headers.get("Range"),
            "object": requests.get(ctx.json_url("res")).status_code}


@step("resumable.overlap", "resend bytes 0-524287 (overlaps the persisted 256 KiB), then the "
      "final 'bytes 524288-600000/600001'", {"overlap": 308, "range": "bytes=0-524287",
                                              "final": 200, "crc32c_ok": True})
def _(ctx):
    data = payload(256 * KiB, 3) + payload(600001 - 256 * KiB, 4)
    r1 = requests.put(ctx.state["session"], data=data[:512 * KiB],
                      headers={"Content-Range": f"bytes 0-{512 * KiB - 1}/*"})
    r2 = requests.put(ctx.state["session"], data=data[512 * KiB:],
                      headers={"Content-Range": f"bytes {512 * KiB}-600000/600001"})
    ok = r2.status_code in (200, 201) and r2.json().get("crc32c") == crc32c_b64(data)
    return {"overlap": r1.status_code, "range": r1.headers.get("Range"), "final": r2.status_code,
            "crc32c_ok": ok}


@step("resumable.go_no_308", "Go client style: POST chunks with 'X-GUploader-No-308: yes'",
      {"chunk": 200, "override": "308", "range": "bytes=0-262143", "final": 200,
       "crc32c_ok": True})
def _(ctx):
    r = requests.post(ctx.upload_url(), params={"uploadType": "resumable", "name": "go"},
                      json={})
    session = r.headers.get("Location")
    data = payload(300 * KiB, 8)
    h = {"X-GUploader-No-308": "yes"}
    r1 = requests.post(session, data=data[:256 * KiB],
                       headers={**h, "Content-Range": f"bytes 0-{256 * KiB - 1}/*"})
    r2 = requests.post(session, data=data[256 * KiB:],
                       headers={**h, "Content-Range": f"bytes {256 * KiB}-{len(data) - 1}/"
                                                     f"{len(data)}"})
    ok = r2.status_code == 200 and r2.json().get("crc32c") == crc32c_b64(data)
    return {"chunk": r1.status_code, "override": r1.headers.get("X-Http-Status-Code-Override"),
            "range": r1.headers.get("Range"), "final": r2.status_code, "crc32c_ok": ok}


@step("upload.multipart.empty_media_part", "multipart/related whose media part has no headers "
      "and no bytes (Go client, empty file)", {"status": 200, "size": "0"})
def _(ctx):
    b = "bnd42"
    body = (f"--{b}\r\nContent-Type: application/json\r\n\r\n{{\"name\":\"empty-go\"}}\r\n"
            f"--{b}\r\n\r\n\r\n--{b}--\r\n").encode()
    r = requests.post(ctx.upload_url(), params={"uploadType": "multipart"}, data=body,
                      headers={"Content-Type": f"multipart/related; boundary={b}"})
    return {"status": r.status_code, "size": r.json().get("size") if r.ok else None}


@step("upload.client.if_metageneration_not_match", "upload_from_string(if_metageneration_not_match"
      "=<current>) (the client sends ifMetaGenerationNotMatch)", 412)
def _(ctx):
    blob = ctx.b.get_blob("n07")
    return status_of(lambda: ctx.b.blob("n07").upload_from_string(
        b"x", if_metageneration_not_match=blob.metageneration))


@step("resumable.cancel", "DELETE the session URL, then a status query",
      {"cancel": 499, "after": 404})
def _(ctx):
    r = requests.post(ctx.upload_url(), params={"uploadType": "resumable", "name": "res2"},
                      json={})
    session = r.headers.get("Location")
    c = requests.delete(session).status_code
    a = requests.put(session, headers={"Content-Range": "bytes */*"}).status_code
    return {"cancel": c, "after": a}


@step("xml.put_get", "XML PUT /B/xml obj, GET with Range bytes=0-1",
      {"put": 200, "generation_header": True, "get": 206, "body": "xm"})
def _(ctx):
    p = requests.put(ctx.xml_url("xml obj"), data=b"xml-bytes")
    g = requests.get(ctx.xml_url("xml obj"), headers={"Range": "bytes=0-1"})
    return {"put": p.status_code, "generation_header": "x-goog-generation" in p.headers,
            "get": g.status_code, "body": g.text}


@step("xml.if_generation_match", "XML PUT x-goog-if-generation-match: 0 over an existing object",
      412)
def _(ctx):
    return requests.put(ctx.xml_url("xml obj"), data=b"z",
                        headers={"x-goog-if-generation-match": "0"}).status_code


@step("xml.missing", "XML GET of a missing object", {"status": 404, "code": "NoSuchKey"})
def _(ctx):
    r = requests.get(ctx.xml_url("no such object"))
    try:
        code = next(e.text for e in ET.fromstring(r.content).iter() if e.tag.endswith("Code"))
    except Exception:  # noqa: BLE001
        code = "<no XML error body>"
    return {"status": r.status_code, "code": code}


@step("xml.multipart", "XML multipart: POST ?uploads, PUT 2 parts, POST ?uploadId",
      {"initiate": 200, "parts": [200, 200], "complete": 200, "crc32c_ok": True})
def _(ctx):
    url = ctx.xml_url("mpu")
    r = requests.post(url + "?uploads")
    out = {"initiate": r.status_code}
    try:
        upload_id = next(e.text for e in ET.fromstring(r.content).iter()
                         if e.tag.endswith("UploadId"))
    except Exception:  # noqa: BLE001
        return {**out, "parts": None, "complete": None, "crc32c_ok": False}
    parts = [payload(5 * MiB, 5), payload(10, 6)]
    rs = [requests.put(f"{url}?partNumber={n}&uploadId={upload_id}", data=p)
          for n, p in enumerate(parts, 1)]
    out["parts"] = [x.status_code for x in rs]
    xml = "<CompleteMultipartUpload>" + "".join(
        f"<Part><PartNumber>{n}</PartNumber><ETag>{x.headers.get('ETag')}</ETag></Part>"
        for n, x in enumerate(rs, 1)) + "</CompleteMultipartUpload>"
    c = requests.post(f"{url}?uploadId={upload_id}", data=xml)
    out["complete"] = c.status_code
    g = requests.get(ctx.json_url("mpu"))
    out["crc32c_ok"] = g.status_code == 200 and g.json().get("crc32c") == crc32c_b64(b"".join(parts))
    return out


@step("transfer_manager.upload_chunks_concurrently", "upload_chunks_concurrently(11 MiB, "
      "chunk_size=5 MiB, threads)", {"ok": True})
def _(ctx):
    from google.cloud.storage import transfer_manager
    data = payload(11 * MiB, 7)
    with tempfile.NamedTemporaryFile() as f:
        f.write(data)
        f.flush()
        try:
            transfer_manager.upload_chunks_concurrently(
                f.name, ctx.b.blob("tm"), chunk_size=5 * MiB,
                worker_type=transfer_manager.THREAD, max_workers=3)
        except Exception as e:  # noqa: BLE001
            return {"error": type(e).__name__}
    return {"ok": ctx.b.blob("tm").download_as_bytes() == data}


@step("names.unusual", "upload/list/download 'sp ace%#?+é/x' and 'a//b'",
      {"listed": ["a//b", "sp ace%#?+é/x"], "bodies_ok": True})
def _(ctx):
    names = ["sp ace%#?+é/x", "a//b"]
    for n in names:
        ctx.b.blob(n).upload_from_string(n.encode())
    listed = sorted(b.name for b in ctx.client.list_blobs(ctx.bucket, prefix="a//")) + \
        sorted(b.name for b in ctx.client.list_blobs(ctx.bucket, prefix="sp ace"))
    ok = all(ctx.b.blob(n).download_as_bytes() == n.encode() for n in names)
    return {"listed": listed, "bodies_ok": ok}


@step("error.malformed_json", "POST /storage/v1/b with body '{not json'",
      {"status": 400, "json_error": True})
def _(ctx):
    r = requests.post(f"{ctx.url}/storage/v1/b", params={"project": "p"}, data=b"{not json",
                      headers={"Content-Type": "application/json"})
    try:
        has = r.json()["error"]["code"] == 400
    except Exception:  # noqa: BLE001
        has = False
    return {"status": r.status_code, "json_error": has}


@step("error.not_found", "GET metadata of a missing object", NOT_FOUND)
def _(ctx):
    r = requests.get(ctx.json_url("missing"))
    return {"status": r.status_code, "reason": error_reason(r)}


@step("error.bad_page_token", "objects.list pageToken=garbage", 400)
def _(ctx):
    return requests.get(ctx.json_url(), params={"pageToken": "!!garbage!!"}).status_code


# --------------------------------------------------------------------------------------------
# Running and comparing
# --------------------------------------------------------------------------------------------


def run_sequence(url: str, client, bucket: str) -> dict:
    """Runs every step in order; returns {step name: observation}. A step that raises is
    recorded as 'exception: ...' and the sequence continues."""
    ctx = Ctx(url=url, client=client, bucket=bucket)
    out = {}
    for s in STEPS:
        try:
            out[s.name] = s.fn(ctx)
        except Exception as e:  # noqa: BLE001
            out[s.name] = f"exception: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
            if "-v" in __import__("sys").argv:
                traceback.print_exc()
    return out


def deviations(observed: dict) -> dict:
    """{step: observation} for the steps where the observation is not Cloud Storage's."""
    return {s.name: observed[s.name] for s in STEPS if observed[s.name] != s.expect}


def markdown_table(results: dict) -> str:
    """results: {server kind: observations}. One row per step where any server deviates."""
    kinds = list(results)
    lines = ["| step | call | Cloud Storage | " + " | ".join(kinds) + " |",
             "|---|---|---|" + "---|" * len(kinds)]
    for s in STEPS:
        if all(results[k][s.name] == s.expect for k in kinds):
            continue
        cells = ["same" if results[k][s.name] == s.expect else f"`{results[k][s.name]}`"
                 for k in kinds]
        lines.append(f"| {s.name} | {s.call} | `{s.expect}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_all(kinds=None) -> dict:
    from tests.lib.emulator import KINDS, Emulator, find_binary, storage_client, \
        unique_bucket_name
    results = {}
    for kind in kinds or KINDS:
        if find_binary(kind) is None:
            continue
        with Emulator(kind=kind) as emu:
            results[kind] = run_sequence(emu.url, storage_client(emu), unique_bucket_name("cmp"))
    return results


if __name__ == "__main__":
    res = run_all()
    print(f"{len(STEPS)} steps; servers: {', '.join(res)}\n")
    print(markdown_table(res))


# Where fake-gcs-server (v1.56.1) departs from Cloud Storage in this sequence, and why it
# matters to us. tests/emulator/README.md explains each; test_fake_gcs_compare.py checks that
# this list is exactly what a run observes, so the record stays true when either server changes.
KNOWN_FAKE_DIFFERENCES = {
    "bucket.testIamPermissions": "no testIamPermissions endpoint (404)",
    "list.delimiter.paged": "prefixes are not paginated with items: every prefix of the whole "
                            "listing comes on the first page, and maxResults counts items only",
    "list.multichar_delimiter": "prefix truncated to the delimiter's first character",
    "get.ifGenerationNotMatch.current": "read preconditions ignored (200 instead of 304)",
    "get.ifGenerationMatch.wrong": "read preconditions ignored (200 instead of 412)",
    "media.headers": "no x-goog-metageneration on media downloads",
    "patch.metadata": "patch does not return/increment metageneration",
    "patch.ifMetagenerationMatch.wrong": "patch preconditions ignored",
    "compose": "no componentCount; composite gets an md5Hash",
    "compose.ifGenerationMatch=0.existing": "compose destination preconditions ignored",
    "compose.source.ifGenerationMatch.wrong": "compose source preconditions ignored",
    "compose.missing_source": "500 instead of 404 for a missing source",
    "copy.ifGenerationMatch=0.existing": "copy destination preconditions ignored",
    "copy.ifSourceGenerationMatch.wrong": "copy source preconditions ignored",
    "rewrite.ifGenerationMatch=0.existing": "rewrite destination preconditions ignored",
    "delete.ifGenerationMatch.wrong": "delete preconditions ignored: the object is deleted",
    "delete": "cascade of the previous step: the object was already deleted (404)",
    "resumable.status_query": "a status query finalizes the upload (200, object exists)",
    "resumable.overlap": "cascade: the session was finalized by the status query",
    "resumable.cancel": "the session still answers after a cancel",
    "xml.put_get": "no XML API object upload (PUT /BUCKET/OBJECT -> 400)",
    "xml.if_generation_match": "no XML API object upload",
    "xml.missing": "no XML error body",
    "xml.multipart": "no XML multipart upload",
    "transfer_manager.upload_chunks_concurrently": "needs XML multipart upload",
    "error.bad_page_token": "an invalid pageToken is accepted (200)",
    "upload.client.if_metageneration_not_match": "ifMeta(G)enerationNotMatch ignored on uploads",
}
