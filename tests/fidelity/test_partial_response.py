"""Fidelity: partial responses (the JSON API's `fields` parameter) through Google's Python
client and raw requests: list pages and object resources carry exactly the members asked for,
and a malformed selection is a 400 (Cloud Storage's "Invalid field selection")."""

import pytest
import requests

from tests.fidelity.common import crc32c_b64, payload

LIST_FIELDS = ("nextPageToken,prefixes,items(name,size,generation,metageneration,updated,"
               "crc32c,contentEncoding,metadata)")


def put(bucket, name, data=b"x", **kw):
    blob = bucket.blob(name)
    blob.upload_from_string(data, **kw)
    return blob


def list_url(emulator, bucket, **params):
    return requests.get(f"{emulator.url}/storage/v1/b/{bucket}/o", params=params)


def test_client_list_with_fields(gcs, fresh_bucket):
    data = payload(300, 3)
    for i in range(5):
        blob = fresh_bucket.blob(f"d/{i}")
        blob.metadata = {"goog-reserved-file-mtime": "1700000000"}
        blob.upload_from_string(data)
    put(fresh_bucket, "d/sub/x")
    it = gcs.list_blobs(fresh_bucket, prefix="d/", delimiter="/", page_size=2,
                        fields=LIST_FIELDS)
    blobs = list(it)
    assert [b.name for b in blobs] == [f"d/{i}" for i in range(5)]
    assert it.prefixes == {"d/sub/"}
    for b in blobs:
        assert b.size == 300
        assert b.generation > 0 and b.metageneration == 1
        assert b.crc32c == crc32c_b64(data)
        assert b.updated is not None
        assert b.metadata == {"goog-reserved-file-mtime": "1700000000"}
        # not asked for
        assert b.content_type is None and b.etag is None and b.storage_class is None
        assert b.media_link is None and b.time_created is None


@pytest.mark.emulator_only
def test_raw_list_members_are_exactly_the_selection(emulator, gcs, fresh_bucket):
    for i in range(3):
        put(fresh_bucket, f"p/{i}", b"abc", content_type="text/plain")
    put(fresh_bucket, "p/q/r")
    body = list_url(emulator, fresh_bucket.name, prefix="p/", delimiter="/", maxResults=2,
                    fields=LIST_FIELDS).json()
    assert set(body) == {"nextPageToken", "prefixes", "items"} or set(body) == {
        "nextPageToken", "items"}
    for item in body["items"]:
        assert set(item) == {"name", "size", "generation", "metageneration", "updated", "crc32c"}
    full = list_url(emulator, fresh_bucket.name, prefix="p/", maxResults=2).json()
    assert full["kind"] == "storage#objects" and "selfLink" in full["items"][0]
    # paths and nested selections
    body = list_url(emulator, fresh_bucket.name, fields="items/name,kind").json()
    assert body["kind"] == "storage#objects"
    assert [set(i) for i in body["items"]] == [{"name"}] * 4
    body = list_url(emulator, fresh_bucket.name, fields="nextPageToken").json()
    assert body == {}


@pytest.mark.emulator_only
def test_raw_get_fields_and_metadata_keys(emulator, fresh_bucket):
    blob = fresh_bucket.blob("m")
    blob.metadata = {"a": "1", "b": "2"}
    blob.upload_from_string(b"hello")
    url = f"{emulator.url}/storage/v1/b/{fresh_bucket.name}/o/m"
    assert requests.get(url, params={"fields": "name,size"}).json() == {"name": "m",
                                                                         "size": "5"}
    got = requests.get(url, params={"fields": "metadata(a)"}).json()
    assert got == {"metadata": {"a": "1"}}
    got = requests.get(url, params={"fields": "*"}).json()
    assert got["kind"] == "storage#object" and got["metadata"] == {"a": "1", "b": "2"}


@pytest.mark.emulator_only
@pytest.mark.parametrize("selection", ["items(", "items)", "a,,b", "items()", "(name)"])
def test_malformed_selection_is_400(emulator, fresh_bucket, selection):
    put(fresh_bucket, "z")
    r = list_url(emulator, fresh_bucket.name, fields=selection)
    assert r.status_code == 400
    assert r.json()["error"]["errors"][0]["reason"] == "invalidParameter"
    r = requests.get(f"{emulator.url}/storage/v1/b/{fresh_bucket.name}/o/z",
                     params={"fields": selection})
    assert r.status_code == 400
