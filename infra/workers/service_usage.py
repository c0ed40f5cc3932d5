"""A service's quota limits for a project, from Service Usage v1beta1
`services.consumerQuotaMetrics.list` (what `gcloud alpha services quota list` shows).

The TPU API has no quota method of its own, and no google-cloud client library covers
Service Usage v1beta1 (google-cloud-service-usage is v1 only, which has no quota methods), so
this is one small REST call through google-auth's AuthorizedSession, at the URL the discovery
document (serviceusage.v1beta1.json) gives. `api_endpoint` points it at an emulator or the
tests' fake over plain http, like the other clients (clients.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from infra.workers.clients import CLOUD_PLATFORM

if TYPE_CHECKING:
    from google.auth.credentials import Credentials

SERVICE_USAGE = "https://serviceusage.googleapis.com"
TIMEOUT_S = 30.0


class QuotaUnreadable(Exception):
    """The limits could not be read (API disabled, no permission, no credentials, offline)."""


def consumer_quota_metrics(
    project: str,
    service: str,
    credentials: Credentials | None,
    api_endpoint: str | None = None,
) -> list[dict[str, Any]]:
    """Every ConsumerQuotaMetric of `service` for `project`, all pages (BASIC view: limits and
    their buckets). Raises QuotaUnreadable with the API's own reason."""
    import google.auth
    import requests
    from google.auth.exceptions import GoogleAuthError
    from google.auth.transport.requests import AuthorizedSession

    base = f"http://{api_endpoint}" if api_endpoint else SERVICE_USAGE
    url = f"{base}/v1beta1/projects/{project}/services/{service}/consumerQuotaMetrics"
    metrics: list[dict[str, Any]] = []
    page = ""
    try:
        if credentials is None:
            credentials, _ = google.auth.default(scopes=[CLOUD_PLATFORM])
        session = AuthorizedSession(credentials)
        while True:
            params = {"view": "BASIC", **({"pageToken": page} if page else {})}
            answer = session.get(url, params=params, timeout=TIMEOUT_S)
            if answer.status_code != 200:
                raise QuotaUnreadable(f"Service Usage answered {answer.status_code}: "
                                      f"{_message(answer)}")
            body = answer.json()
            metrics += body.get("metrics") or []
            page = body.get("nextPageToken") or ""
            if not page:
                return metrics
    except GoogleAuthError as exc:
        raise QuotaUnreadable(f"no Google Cloud credentials ({exc})") from None
    except requests.RequestException as exc:
        raise QuotaUnreadable(f"Service Usage not reachable ({exc})") from None


def _message(answer: Any) -> str:
    try:
        return str(answer.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return answer.text[:200] or answer.reason
