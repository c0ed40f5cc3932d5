"""The slice of the Cloud Storage JSON API v1 that a cluster's nodes and the program use: a
bucket made (`buckets.insert`, `buckets.get`), objects stored (`objects.insert`, a simple media
upload) and read (`objects.get`, its metadata or with `alt=media` its bytes, which is
how a node fetches the file_mounts archive and the head's autoscaler config), listed and
deleted (`objects.list`, `objects.delete`, `buckets.delete`: a bucket with objects refuses, as
Cloud Storage does), and the bucket's IAM policy (`buckets.getIamPolicy`,
`buckets.setIamPolicy`, with its etag checked as a precondition).

Paths are the discovery document's templates (`ROUTES`; a test compares them with the
document google-api-python-client ships). Every request passes `gate` first: the caller's
bearer token, its scope and its IAM permission on the bucket (the bucket's own policy, as
a bucket with uniform bucket-level access has, and its project's: tests/fakes/compute/
access.py), refused in Cloud Storage's JSON error shape.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from tests.fakes.compute.cloud import ApiError

# (HTTP method, path template as the discovery document writes it, method id)
ROUTES = [
    ("POST", "/storage/v1/b", "storage.buckets.insert"),
    ("GET", "/storage/v1/b/{bucket}", "storage.buckets.get"),
    ("DELETE", "/storage/v1/b/{bucket}", "storage.buckets.delete"),
    ("GET", "/storage/v1/b/{bucket}/iam", "storage.buckets.getIamPolicy"),
    ("PUT", "/storage/v1/b/{bucket}/iam", "storage.buckets.setIamPolicy"),
    ("GET", "/storage/v1/b/{bucket}/o", "storage.objects.list"),
    ("DELETE", "/storage/v1/b/{bucket}/o/{object}", "storage.objects.delete"),
    ("POST", "/upload/storage/v1/b/{bucket}/o", "storage.objects.insert"),
    ("GET", "/storage/v1/b/{bucket}/o/{object}", "storage.objects.get"),
]


def _pattern(template: str) -> re.Pattern[str]:
    return re.compile(re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", template) + "$")


_COMPILED = [(verb, _pattern(template), method) for verb, template, method in ROUTES]


@dataclass
class Answer:
    status: int
    content_type: str
    body: bytes


Gate = Callable[[str, dict[str, str], dict[str, str], "str | None"], None]


@dataclass
class FakeStorage:
    """Buckets (with the project each was made in) and their objects; `gate(method id,
    path parameters, query, Authorization header)` raises ApiError to refuse a call."""

    gate: Gate
    buckets: dict[str, dict[str, Any]] = field(default_factory=dict)
    projects: dict[str, str] = field(default_factory=dict)  # bucket -> project
    objects: dict[tuple[str, str], bytes] = field(default_factory=dict)
    policies: dict[str, dict[str, Any]] = field(default_factory=dict)  # bucket -> IAM policy
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method id, path)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def serves(self, path: str) -> bool:
        return path.startswith(("/storage/v1/", "/upload/storage/v1/"))

    def handle(self, verb: str, path: str, query: dict[str, str], headers: Any,
               raw: bytes) -> Answer:
        for route_verb, pattern, method in _COMPILED:
            match = pattern.match(path) if route_verb == verb else None
            if match is None:
                continue
            with self.lock:
                self.requests.append((method, path))
            params = {key: unquote(value) for key, value in match.groupdict().items()}
            if method != "storage.buckets.insert" and params["bucket"] not in self.buckets:
                return _error(404, "The specified bucket does not exist.", "notFound")
            try:
                self.gate(method, params, query, headers.get("Authorization"))
            except ApiError as refused:
                return Answer(refused.status, "application/json",
                              json.dumps(refused.body()).encode())
            name = method.rsplit(".", 2)[-2] + "_" + method.rsplit(".", 1)[-1]
            return getattr(self, "_" + name)(params, query, headers, raw)
        return _error(404, f"no fake route for {verb} {path}", "notFound")

    def _buckets_insert(self, _p: dict[str, str], query: dict[str, str], _h: Any,
                        raw: bytes) -> Answer:
        body = json.loads(raw or b"{}")
        name = body.get("name", "")
        if not query.get("project"):
            return _error(400, "Required parameter: project", "required")
        with self.lock:
            if name in self.buckets:
                return _error(409, "Your previous request to create the named bucket "
                              "succeeded and you already own it.", "conflict")
            self.projects[name] = query["project"]
            self.buckets[name] = {
                **body, "kind": "storage#bucket", "id": name,
                "selfLink": f"https://www.googleapis.com/storage/v1/b/{name}"}
            return _json(self.buckets[name])

    def _buckets_get(self, p: dict[str, str], _q: dict[str, str], _h: Any, _r: bytes) -> Answer:
        return _json(self.buckets[p["bucket"]])

    def _buckets_delete(self, p: dict[str, str], _q: dict[str, str], _h: Any, _r: bytes) -> Answer:
        with self.lock:
            if any(bucket == p["bucket"] for bucket, _ in self.objects):
                return _error(409, "The bucket you tried to delete is not empty.", "conflict")
            del self.buckets[p["bucket"]]
            self.policies.pop(p["bucket"], None)
        return Answer(204, "application/json", b"")

    def _buckets_getIamPolicy(self, p: dict[str, str], _q: dict[str, str], _h: Any,  # noqa: N802
                              _r: bytes) -> Answer:
        with self.lock:
            return _json(self._policy(p["bucket"]))

    def _buckets_setIamPolicy(self, p: dict[str, str], _q: dict[str, str], _h: Any,  # noqa: N802
                              raw: bytes) -> Answer:
        body = json.loads(raw or b"{}")
        with self.lock:
            current = self._policy(p["bucket"])
            if body.get("etag") and body["etag"] != current["etag"]:
                return _error(412, "Precondition Failed", "conditionNotMet")
            version = int(base64.b64decode(current["etag"]).decode()) + 1
            self.policies[p["bucket"]] = {
                "kind": "storage#policy", "resourceId": f"projects/_/buckets/{p['bucket']}",
                "bindings": body.get("bindings") or [], "version": 1,
                "etag": base64.b64encode(str(version).encode()).decode()}
            return _json(self.policies[p["bucket"]])

    def grant(self, bucket: str, role: str, member: str) -> None:
        """Add `member` to `role` in the bucket's IAM policy (a BucketIAMMember)."""
        with self.lock:
            bindings = self._policy(bucket)["bindings"]
            for binding in bindings:
                if binding["role"] == role:
                    if member not in binding["members"]:
                        binding["members"].append(member)
                    return
            bindings.append({"role": role, "members": [member]})

    def _policy(self, bucket: str) -> dict[str, Any]:
        return self.policies.setdefault(bucket, {
            "kind": "storage#policy", "resourceId": f"projects/_/buckets/{bucket}",
            "bindings": [], "version": 1, "etag": base64.b64encode(b"1").decode()})

    def _objects_list(self, p: dict[str, str], _q: dict[str, str], _h: Any, _r: bytes) -> Answer:
        with self.lock:
            items = [_resource(bucket, name, data)
                     for (bucket, name), data in sorted(self.objects.items())
                     if bucket == p["bucket"]]
        return _json({"kind": "storage#objects", "items": items})

    def _objects_delete(self, p: dict[str, str], _q: dict[str, str], _h: Any, _r: bytes) -> Answer:
        with self.lock:
            if self.objects.pop((p["bucket"], p["object"]), None) is None:
                return _error(404, f"No such object: {p['bucket']}/{p['object']}", "notFound")
        return Answer(204, "application/json", b"")

    def _objects_insert(self, p: dict[str, str], query: dict[str, str], _h: Any,
                        raw: bytes) -> Answer:
        if query.get("uploadType") != "media":
            return _error(400, f"uploadType {query.get('uploadType')!r} is not served here",
                          "invalid")
        name, data = query.get("name", ""), raw
        if not name:
            return _error(400, "Required parameter: name", "required")
        with self.lock:
            self.objects[(p["bucket"], name)] = data
        return _json(_resource(p["bucket"], name, data))

    def _objects_get(self, p: dict[str, str], query: dict[str, str], _h: Any, _r: bytes) -> Answer:
        with self.lock:
            data = self.objects.get((p["bucket"], p["object"]))
        if data is None:
            return _error(404, f"No such object: {p['bucket']}/{p['object']}", "notFound")
        if query.get("alt") == "media":
            return Answer(200, "application/octet-stream", data)
        return _json(_resource(p["bucket"], p["object"], data))


def _resource(bucket: str, name: str, data: bytes) -> dict[str, Any]:
    link = f"https://www.googleapis.com/storage/v1/b/{bucket}/o/{quote(name, safe='')}"
    return {"kind": "storage#object", "bucket": bucket, "name": name, "size": str(len(data)),
            "id": f"{bucket}/{name}/1", "generation": "1", "selfLink": link,
            "mediaLink": f"https://storage.googleapis.com/download/storage/v1/b/{bucket}/o/"
                         f"{quote(name, safe='')}?generation=1&alt=media",
            "md5Hash": base64.b64encode(hashlib.md5(data).digest()).decode()}  # noqa: S324


def _json(value: Any) -> Answer:
    return Answer(200, "application/json", json.dumps(value).encode())


def _error(status: int, message: str, reason: str) -> Answer:
    return Answer(status, "application/json", json.dumps({"error": {
        "code": status, "message": message,
        "errors": [{"message": message, "domain": "global", "reason": reason}]}}).encode())
