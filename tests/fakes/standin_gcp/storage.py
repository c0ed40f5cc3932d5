"""The Cloud Storage resources: google_storage_bucket, google_storage_bucket_iam_member and
google_storage_bucket_object, over the Cloud Storage JSON API, with ids as the Terraform
resources set them (the bucket's name; `b/{bucket}/{role}/{member}`; `{bucket}-{name}`).

A BucketObject's `source` arrives as the engine serialises an asset to a provider: an object
with the signature key `4dabf18193072939515e22adb298388d` (sdk/go/common/resource/sig), its
`hash`, and `path` (a FileAsset, relative to the program's directory), `text` (a StringAsset)
or `uri`. Its bytes are what is uploaded.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

from tests.fakes.standin_gcp.api import ApiError
from tests.fakes.standin_gcp.resources import Handler, Outputs, PolicyMember

SIG_KEY = "4dabf18193072939515e22adb298388d"
ASSET_SIG = "c44067f5952c0a294b673a41bacd8c17"


def asset_bytes(asset: Any) -> bytes:
    """The contents of a serialised asset (a file's bytes, or a string asset's text)."""
    if not isinstance(asset, dict) or asset.get(SIG_KEY) != ASSET_SIG:
        raise ValueError(f"source is not an asset: {asset!r:.80}")
    if "text" in asset:
        return str(asset["text"]).encode()
    if "path" in asset:
        return Path(str(asset["path"])).read_bytes()
    raise ValueError("the stand-in reads only file and string assets")


def _bucket(inputs: dict[str, Any]) -> str:
    return str(inputs["bucket"]).removeprefix("b/")


def _object_path(bucket: str, name: str) -> str:
    return f"b/{bucket}/o/{urllib.parse.quote(name, safe='')}"


class Bucket(Handler):
    """google_storage_bucket; with force_destroy its objects go before it."""

    token = "gcp:storage/bucket:Bucket"
    computed = ("id", "url", "selfLink", "project")

    def create(self, inputs: dict[str, Any]) -> tuple[str, Outputs]:
        iam: dict[str, Any] = {}
        if inputs.get("uniformBucketLevelAccess") is not None:
            iam["uniformBucketLevelAccess"] = {"enabled": inputs["uniformBucketLevelAccess"]}
        if inputs.get("publicAccessPrevention"):
            iam["publicAccessPrevention"] = inputs["publicAccessPrevention"]
        body = {"name": inputs["name"], "location": str(inputs["location"]).upper(),
                "labels": inputs.get("labels") or {}, "iamConfiguration": iam}
        if inputs.get("storageClass"):
            body["storageClass"] = inputs["storageClass"]
        live = self.apis.call("storage", "POST", "b", body, {"project": self.project(inputs)})
        return live["name"], self._outputs(inputs, live)

    def _outputs(self, inputs: dict[str, Any], live: dict[str, Any]) -> Outputs:
        return {**inputs, "project": self.project(inputs), "id": live["name"],
                "name": live["name"], "url": f"gs://{live['name']}",
                "selfLink": live["selfLink"]}

    def read(self, resource_id: str, state: dict[str, Any]) -> Outputs | None:
        live = self.apis.get_or_none("storage", f"b/{resource_id}")
        return None if live is None else self._outputs(state, live)

    def delete(self, resource_id: str, state: dict[str, Any]) -> None:
        if state.get("forceDestroy"):
            listed = self.apis.call("storage", "GET", f"b/{resource_id}/o")
            for item in listed.get("items") or []:
                self.apis.call("storage", "DELETE", _object_path(resource_id, item["name"]))
        self.apis.call("storage", "DELETE", f"b/{resource_id}")


class BucketIamMember(PolicyMember):
    """google_storage_bucket_iam_member (iam_storage_bucket.go: the policy of `b/{bucket}`)."""

    token = "gcp:storage/bucketIAMMember:BucketIAMMember"
    api = "storage"

    def policy_path(self, inputs: dict[str, Any]) -> str:
        return f"b/{_bucket(inputs)}"

    def _policy(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return self.apis.call(self.api, "GET", f"{self.policy_path(inputs)}/iam")

    def _store(self, inputs: dict[str, Any], policy: dict[str, Any]) -> dict[str, Any]:
        return self.apis.call(self.api, "PUT", f"{self.policy_path(inputs)}/iam", policy)


class BucketObject(Handler):
    """google_storage_bucket_object from `source` (an asset) or `content`."""

    token = "gcp:storage/bucketObject:BucketObject"
    computed = ("id", "md5hash", "mediaLink", "outputName", "selfLink")

    def create(self, inputs: dict[str, Any]) -> tuple[str, Outputs]:
        data = (asset_bytes(inputs["source"]) if inputs.get("source") is not None
                else str(inputs.get("content") or "").encode())
        live = self.apis.upload(_bucket(inputs), str(inputs["name"]), data,
                                str(inputs.get("contentType") or "application/octet-stream"))
        return f"{live['bucket']}-{live['name']}", self._outputs(inputs, live)

    @staticmethod
    def _outputs(inputs: dict[str, Any], live: dict[str, Any]) -> Outputs:
        return {**inputs, "id": f"{live['bucket']}-{live['name']}", "bucket": live["bucket"],
                "name": live["name"], "outputName": live["name"], "md5hash": live["md5Hash"],
                "mediaLink": live["mediaLink"], "selfLink": live["selfLink"]}

    def read(self, resource_id: str, state: dict[str, Any]) -> Outputs | None:
        live = self.apis.get_or_none("storage", _object_path(_bucket(state), state["name"]))
        return None if live is None else self._outputs(state, live)

    def delete(self, resource_id: str, state: dict[str, Any]) -> None:
        try:
            self.apis.call("storage", "DELETE", _object_path(_bucket(state), state["name"]))
        except ApiError as error:
            if error.status != 404:  # already gone (the bucket's force_destroy): deleted
                raise


HANDLERS: dict[str, type[Handler]] = {
    handler.token: handler for handler in (Bucket, BucketIamMember, BucketObject)
}
