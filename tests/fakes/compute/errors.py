"""Google's JSON error answer, shared by the fake's modules."""

from __future__ import annotations

from typing import Any

COMPUTE = "https://www.googleapis.com/compute/v1"


class ApiError(Exception):
    """An HTTP error answer in Google's JSON error shape."""

    def __init__(self, status: int, message: str, reason: str = "invalid",
                 status_name: str = "", details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.reason = status, message, reason
        self.status_name, self.details = status_name, details or []
        self.retry_after: int | None = None  # sent as the Retry-After header when set

    def body(self) -> dict[str, Any]:
        """Google's JSON error body (https://cloud.google.com/apis/design/errors#http_mapping)."""
        error: dict[str, Any] = {"code": self.status, "message": self.message,
                                 "errors": [{"message": self.message, "domain": "global",
                                             "reason": self.reason}]}
        if self.status_name:
            error["status"] = self.status_name
        if self.details:
            error["details"] = self.details
        return {"error": error}
