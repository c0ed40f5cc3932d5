"""A Cloud Storage emulator on 127.0.0.1, as the pulumi engine's `gs://` backend reaches one.

With STORAGE_EMULATOR_HOST set, gocloud.dev/blob/gcsblob (OpenBucket) and
cloud.google.com/go/storage (NewClient) send every call to `http://$STORAGE_EMULATOR_HOST`
without credentials (`option.WithoutAuthentication`), as they do to Google's own emulators:
so this fake, like them, takes unauthenticated calls. What the engine sends, and so what is
served here:
- reads through the XML API (`GET /BUCKET/OBJECT`, the storage client's default for reads:
  http_client.go newRangeReaderXML), answered with the object's bytes and `X-Goog-Generation`;
- `objects.get` (metadata; `alt=media` bytes), `objects.list` (`prefix`, `delimiter`,
  `versions`, pages), `objects.delete`, `objects.rewrite` (gocloud's Copy) and
  `objects.insert` as a multipart or resumable upload (the Go client's Writer), from the
  JSON API's reference https://cloud.google.com/storage/docs/json_api/v1/objects;
- buckets made and their versioning set (`buckets.insert`, `buckets.get`, `buckets.patch`).

Refused as Cloud Storage refuses: a missing bucket or object (404 notFound); an
`ifGenerationMatch` precondition that does not hold (412 conditionNotMet:
https://cloud.google.com/storage/docs/request-preconditions); a bucket name taken (409); a
generation of an object that has none such (404). Object versioning
(https://cloud.google.com/storage/docs/object-versioning): with it on, an overwritten or
deleted object's live version becomes noncurrent and stays readable by its generation
(`?generation=`), listed with `versions=true`; without it, it is gone.

`fail_next` answers the next calls with Cloud Storage's transient errors, one each: 429
`rateLimitExceeded` and 503 `backendError`, which clients are to retry with backoff
(https://cloud.google.com/storage/docs/json_api/v1/status-codes,
https://cloud.google.com/storage/docs/retry-strategy).
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit


@dataclass
class Version:
    generation: int
    data: bytes
    content_type: str
    updated: str


@dataclass
class GcsState:
    buckets: dict[str, dict[str, Any]] = field(default_factory=dict)
    live: dict[tuple[str, str], Version] = field(default_factory=dict)
    noncurrent: list[tuple[str, str, Version]] = field(default_factory=list)
    uploads: dict[str, tuple[str, str, str, bytearray]] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    fail_next: list[int] = field(default_factory=list)
    """Statuses (429, 503) the next calls answer with, one each (module docstring)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    _generation: int = 1_700_000_000_000_000

    def next_generation(self) -> int:
        self._generation += 1
        return self._generation


class GcsError(Exception):
    def __init__(self, status: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.status, self.message, self.reason = status, message, reason


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _resource(bucket: str, name: str, version: Version) -> dict[str, Any]:
    return {"kind": "storage#object", "bucket": bucket, "name": name,
            "id": f"{bucket}/{name}/{version.generation}", "size": str(len(version.data)),
            "generation": str(version.generation), "metageneration": "1",
            "contentType": version.content_type, "updated": version.updated,
            "timeCreated": version.updated, "storageClass": "STANDARD",
            "selfLink": f"http://127.0.0.1/storage/v1/b/{bucket}/o/{quote(name, safe='')}"}


class FakeGcs:
    """Start as a context manager; `endpoint` is what STORAGE_EMULATOR_HOST takes."""

    def __init__(self) -> None:
        self.state = GcsState()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.05,),
                                        daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._http.server_address[:2]
        return f"{host}:{port}"

    def __enter__(self) -> FakeGcs:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()

    def make_bucket(self, name: str, versioning: bool) -> None:
        with self.state.lock:
            self.state.buckets[name] = {"versioning": {"enabled": versioning}}

    def names(self, bucket: str) -> list[str]:
        with self.state.lock:
            return sorted(name for b, name in self.state.live if b == bucket)

    # ------------------------------------------------------------------ the API

    def _bucket(self, name: str) -> dict[str, Any]:
        if name not in self.state.buckets:
            raise GcsError(404, "The specified bucket does not exist.", "notFound")
        return self.state.buckets[name]

    def _version(self, bucket: str, name: str, generation: str | None) -> Version:
        self._bucket(bucket)
        live = self.state.live.get((bucket, name))
        if generation is None:
            if live is None:
                raise GcsError(404, f"No such object: {bucket}/{name}", "notFound")
            return live
        for b, n, version in [(bucket, name, live), *self.state.noncurrent]:
            if (b, n) == (bucket, name) and version and str(version.generation) == generation:
                return version
        raise GcsError(404, f"No such object: {bucket}/{name}#{generation}", "notFound")

    def _store(self, bucket: str, name: str, data: bytes, content_type: str,
               query: dict[str, str]) -> Version:
        """A new live version, after the preconditions; the old one kept if versioning."""
        config = self._bucket(bucket)
        live = self.state.live.get((bucket, name))
        wanted = query.get("ifGenerationMatch")
        if wanted is not None and str(live.generation if live else 0) != wanted:
            raise GcsError(412, "At least one of the pre-conditions you specified did not "
                           "hold.", "conditionNotMet")
        if live is not None and config["versioning"]["enabled"]:
            self.state.noncurrent.append((bucket, name, live))
        version = Version(self.state.next_generation(), data,
                          content_type or "application/octet-stream", _now())
        self.state.live[(bucket, name)] = version
        return version

    def _delete(self, bucket: str, name: str, generation: str | None) -> None:
        config = self._bucket(bucket)
        live = self.state.live.get((bucket, name))
        if generation is not None and (live is None or str(live.generation) != generation):
            before = len(self.state.noncurrent)
            self.state.noncurrent = [entry for entry in self.state.noncurrent
                                     if (entry[0], entry[1], str(entry[2].generation))
                                     != (bucket, name, generation)]
            if len(self.state.noncurrent) == before:
                raise GcsError(404, f"No such object: {bucket}/{name}", "notFound")
            return
        if live is None:
            raise GcsError(404, f"No such object: {bucket}/{name}", "notFound")
        del self.state.live[(bucket, name)]
        if config["versioning"]["enabled"] and generation is None:
            self.state.noncurrent.append((bucket, name, live))

    def _list(self, bucket: str, query: dict[str, str]) -> dict[str, Any]:
        self._bucket(bucket)
        prefix, delimiter = query.get("prefix", ""), query.get("delimiter", "")
        entries = [(n, v) for (b, n), v in self.state.live.items() if b == bucket]
        if query.get("versions") == "true":
            entries += [(n, v) for b, n, v in self.state.noncurrent if b == bucket]
        items, prefixes = [], set()
        for name, version in sorted(entries, key=lambda e: (e[0], e[1].generation)):
            if not name.startswith(prefix):
                continue
            rest = name[len(prefix):]
            if delimiter and delimiter in rest:
                prefixes.add(prefix + rest.split(delimiter, 1)[0] + delimiter)
                continue
            items.append(_resource(bucket, name, version))
        start = int(query.get("pageToken") or 0)
        size = int(query.get("maxResults") or 1000)
        answer: dict[str, Any] = {"kind": "storage#objects", "items": items[start:start + size]}
        if prefixes:
            answer["prefixes"] = sorted(prefixes)
        if start + size < len(items):
            answer["nextPageToken"] = str(start + size)
        return answer

    def handle(self, verb: str, raw_path: str, query: dict[str, str], headers: Any,
               body: bytes) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body) of one call."""
        self.state.requests.append((verb, raw_path))
        parts = raw_path.strip("/").split("/")
        with self.state.lock:
            if self.state.fail_next:
                status = self.state.fail_next.pop(0)
                raise GcsError(status, *_TRANSIENT[status])
            if parts[:2] == ["storage", "v1"]:
                return self._json_api(verb, _json_path(unquote("/".join(parts[2:]))), query,
                                      body)
            if parts[:3] == ["upload", "storage", "v1"]:
                return self._upload(verb, [unquote(p) for p in parts[3:]], query, headers,
                                    body)
            # the XML API: /BUCKET/OBJECT (the object's name keeps its slashes)
            bucket, name = unquote(parts[0]), unquote("/".join(parts[1:]))
            version = self._version(bucket, name, query.get("generation"))
            return 200, {"Content-Type": version.content_type,
                         "X-Goog-Generation": str(version.generation),
                         "X-Goog-Metageneration": "1",
                         "X-Goog-Stored-Content-Length": str(len(version.data)),
                         "Last-Modified": time.strftime("%a, %d %b %Y %H:%M:%S GMT")}, (
                b"" if verb == "HEAD" else version.data)

    def _json_api(self, verb: str, path: list[str], query: dict[str, str],
                  body: bytes) -> tuple[int, dict[str, str], bytes]:
        if path == ["b"] and verb == "POST":
            bucket = json.loads(body or b"{}")
            if bucket.get("name") in self.state.buckets:
                raise GcsError(409, "The bucket name is already taken.", "conflict")
            if not query.get("project"):
                raise GcsError(400, "Required parameter: project", "required")
            self.state.buckets[bucket["name"]] = {
                "versioning": {"enabled": bool((bucket.get("versioning") or {}).get("enabled"))},
                "iamConfiguration": bucket.get("iamConfiguration") or {},
                "location": str(bucket.get("location") or "US").upper()}
            return _json({"kind": "storage#bucket", "name": bucket["name"],
                          **self.state.buckets[bucket["name"]]})
        if len(path) == 2 and path[0] == "b":
            config = self._bucket(path[1])
            if verb == "PATCH":
                patch = json.loads(body or b"{}")
                if "versioning" in patch:
                    config["versioning"] = {"enabled": bool(patch["versioning"].get("enabled"))}
            return _json({"kind": "storage#bucket", "name": path[1], **config})
        if len(path) == 3 and path[0] == "b" and path[2] == "o" and verb == "GET":
            return _json(self._list(path[1], query))
        if len(path) == 4 and path[0] == "b" and path[2] == "o":
            bucket, name = path[1], path[3]
            if verb == "DELETE":
                self._delete(bucket, name, query.get("generation"))
                return 204, {}, b""
            version = self._version(bucket, name, query.get("generation"))
            if query.get("alt") == "media":
                return 200, {"Content-Type": version.content_type,
                             "X-Goog-Generation": str(version.generation)}, version.data
            return _json(_resource(bucket, name, version))
        if len(path) == 9 and path[4] == "rewriteTo" and verb == "POST":
            source = self._version(path[1], path[3], query.get("sourceGeneration"))
            made = self._store(path[6], path[8], source.data, source.content_type, query)
            return _json({"kind": "storage#rewriteResponse", "done": True,
                          "totalBytesRewritten": str(len(source.data)),
                          "objectSize": str(len(source.data)),
                          "resource": _resource(path[6], path[8], made)})
        raise GcsError(404, f"no fake route for {verb} /storage/v1/{'/'.join(path)}",
                       "notFound")

    def _upload(self, verb: str, path: list[str], query: dict[str, str], headers: Any,
                body: bytes) -> tuple[int, dict[str, str], bytes]:
        if len(path) != 3 or path[0] != "b" or path[2] != "o":
            raise GcsError(404, "no such upload path", "notFound")
        bucket = path[1]
        self._bucket(bucket)
        kind = query.get("uploadType")
        if kind == "media" and verb == "POST":
            made = self._store(bucket, query.get("name", ""), body,
                               headers.get("Content-Type", ""), query)
            return _json(_resource(bucket, query.get("name", ""), made))
        if kind == "multipart" and verb == "POST":
            message = BytesParser(policy=HTTP).parsebytes(
                b"Content-Type: " + headers.get("Content-Type", "").encode() + b"\r\n\r\n"
                + body)
            metadata_part, media_part = list(message.iter_parts())[:2]
            metadata = json.loads(metadata_part.get_payload(decode=True) or b"{}")
            name = metadata.get("name") or query.get("name", "")
            made = self._store(bucket, name, media_part.get_payload(decode=True) or b"",
                               metadata.get("contentType") or media_part.get_content_type(),
                               query)
            return _json(_resource(bucket, name, made))
        if kind == "resumable" and verb == "POST":
            metadata = json.loads(body or b"{}")
            upload = uuid.uuid4().hex
            self.state.uploads[upload] = (bucket, metadata.get("name") or query["name"],
                                          metadata.get("contentType", ""), bytearray())
            location = (f"http://{headers.get('Host')}/upload/storage/v1/b/{quote(bucket)}/o"
                        f"?uploadType=resumable&upload_id={upload}")
            return 200, {"Location": location}, b""
        if kind == "resumable" and verb == "PUT":
            bucket, name, content_type, data = self.state.uploads[query["upload_id"]]
            data.extend(body)
            total = (headers.get("Content-Range") or "").rsplit("/", 1)[-1]
            if total != "*" and total.isdigit() and int(total) == len(data) or not total:
                del self.state.uploads[query["upload_id"]]
                made = self._store(bucket, name, bytes(data), content_type, query)
                return _json(_resource(bucket, name, made))
            return 308, {"Range": f"bytes=0-{len(data) - 1}"}, b""
        raise GcsError(400, f"uploadType {kind!r} is not served here", "invalid")


_REWRITE = re.compile(r"b/(?P<sb>[^/]+)/o/(?P<so>.+)/rewriteTo/b/(?P<db>[^/]+)/o/(?P<do>.+)")
_OBJECT = re.compile(r"b/(?P<b>[^/]+)/o/(?P<o>.+)")


_TRANSIENT = {429: ("The rate of change requests to the bucket exceeds the rate limit.",
                    "rateLimitExceeded"),
              503: ("We encountered an internal error. Please try again.", "backendError")}


def _json_path(path: str) -> list[str]:
    """A JSON API path's segments, an object's name whole (the Go client sends its slashes as
    they are, google-api-python-client as %2F)."""
    rewrite = _REWRITE.fullmatch(path)
    if rewrite:
        return ["b", rewrite["sb"], "o", rewrite["so"], "rewriteTo", "b", rewrite["db"], "o",
                rewrite["do"]]
    found = _OBJECT.fullmatch(path)
    return ["b", found["b"], "o", found["o"]] if found else path.split("/")


def _json(value: Any) -> tuple[int, dict[str, str], bytes]:
    return 200, {"Content-Type": "application/json"}, json.dumps(value).encode()


def _handler(fake: FakeGcs) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            """Quiet."""

        def _serve(self) -> None:
            url = urlsplit(self.path)
            query = {key: values[-1] for key, values in parse_qs(url.query).items()}
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                body = bytearray()
                while True:
                    size = int(self.rfile.readline().split(b";")[0], 16)
                    if size == 0:
                        self.rfile.readline()
                        break
                    body.extend(self.rfile.read(size))
                    self.rfile.readline()
                raw = bytes(body)
            else:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
            try:
                status, headers, payload = fake.handle(self.command, url.path, query,
                                                       self.headers, raw)
            except GcsError as error:
                status, headers = error.status, {"Content-Type": "application/json"}
                payload = json.dumps({"error": {"code": error.status, "message": error.message,
                                                "errors": [{"message": error.message,
                                                            "domain": "global",
                                                            "reason": error.reason}]}}).encode()
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _serve  # noqa: N815

    return Handler
