"""Ray's GCP clients on the head, made to read every list page and to wait out rate quotas.

Ray's `GCPCompute.list_instances` sends one `instances.list` and reads its `items`: Compute
answers at most 500 instances a page (`maxResults` 0 to 500, default 500, then a
`nextPageToken`; https://cloud.google.com/compute/docs/reference/rest/v1/instances/list), so
past 500 nodes in a zone the autoscaler would not see the rest and launch them again. And its
calls run `execute()` once: a 403 `rateLimitExceeded` or a 429 (rate_limits.py) would fail the
autoscaler's update. `AllPagesApi` wraps the discovery client Ray holds: a list's `execute()`
follows `list_next` to the last page and answers every item, and every call's `execute()`
waits out a rate quota's refusal as rate_limits.py says (its Retry-After, else the window the
limit names, else a capped backoff), at most `ATTEMPTS` times.

Standard library only (the discovery client is Ray's, reached through the object wrapped).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from typing import Any

from .rate_limits import is_rate_limit, rate_limit_pause

ATTEMPTS = 8
BACKOFF_CAP_S = 20.0


class AllPagesApi:
    """A discovery `Resource` (Ray's `compute` client) whose collections' calls retry rate
    limits and whose `list` calls answer every page."""

    def __init__(self, api: Any, sleep: Callable[[float], None] = time.sleep) -> None:
        self._api = api
        self._sleep = sleep

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._api, name)
        if name.startswith("_") or not callable(found):
            return found
        return lambda *args, **kwargs: _Collection(found(*args, **kwargs), self._sleep)


class _Collection:
    def __init__(self, collection: Any, sleep: Callable[[float], None]) -> None:
        self._collection = collection
        self._sleep = sleep

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._collection, name)
        if name.endswith("_next") or not callable(method):
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            request = method(*args, **kwargs)
            pages = self._collection if name in ("list", "aggregatedList") else None
            return _Request(request, pages, name, self._sleep)

        return call


class _Request:
    def __init__(self, request: Any, pages: Any, method: str,
                 sleep: Callable[[float], None]) -> None:
        self._request, self._pages, self._method, self._sleep = request, pages, method, sleep

    def __getattr__(self, name: str) -> Any:
        return getattr(self._request, name)

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        answer = _retrying(lambda: self._request.execute(*args, **kwargs), self._sleep)
        if self._pages is None:
            return answer
        following = getattr(self._pages, f"{self._method}_next")
        request = following(self._request, answer)
        while request is not None:
            page = _retrying(lambda r=request: r.execute(*args, **kwargs), self._sleep)
            if self._method == "list":
                answer["items"] = [*answer.get("items", []), *page.get("items", [])]
            else:
                for scope, found in (page.get("items") or {}).items():
                    kept = answer.setdefault("items", {}).setdefault(scope, {})
                    for key, values in found.items():
                        if isinstance(values, list):
                            kept[key] = [*kept.get(key, []), *values]
            request = following(request, page)
        answer.pop("nextPageToken", None)
        return answer


def _retrying(call: Callable[[], Any], sleep: Callable[[float], None]) -> Any:
    for attempt in range(ATTEMPTS):
        try:
            return call()
        except Exception as exc:  # googleapiclient's HttpError, told apart by its fields
            pause = _rate_limit_wait(exc, attempt)
            if pause is None or attempt == ATTEMPTS - 1:
                raise
            sleep(pause)
    raise AssertionError("unreachable")


def _rate_limit_wait(exc: Exception, attempt: int) -> float | None:
    """How long to wait after `exc` when it is a rate quota's answer; None otherwise."""
    response = getattr(exc, "resp", None)
    status = int(getattr(response, "status", 0) or 0)
    try:
        error = json.loads(getattr(exc, "content", b"") or b"{}").get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    reasons = [str(e.get("reason")) for e in error.get("errors") or [] if isinstance(e, dict)]
    reasons += [str(d.get("reason")) for d in error.get("details") or [] if isinstance(d, dict)]
    if not is_rate_limit(status, reasons):
        return None
    retry_after = response.get("retry-after") if hasattr(response, "get") else None
    pause = rate_limit_pause(str(error.get("message") or ""), retry_after)
    return pause if pause is not None else random.uniform(0, min(BACKOFF_CAP_S, 2.0 ** attempt))
