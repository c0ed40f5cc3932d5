"""A stand-in for the guest agent's `google_authorized_keys`, the AuthorizedKeysCommand an OS
Login VM's sshd runs (github.com/GoogleCloudPlatform/guest-oslogin,
src/authorized_keys/authorized_keys.cc): it asks the metadata server for the user's OS Login
profile (`oslogin/users?username=`) and whether that account may log in
(`oslogin/authorize?email=&policy=login`, AuthorizeUser), then prints the profile's keys,
leaving out each key whose `expirationTimeUsec` is past (ParseJsonToSshKeys in
src/oslogin_utils.cc). No answer or no authorization, no keys: sshd then refuses the login.

Run by sshd as `python3 oslogin_authorized_keys.py METADATA_BASE_URL %u`; standard library
only (sshd runs it with the system python3). Imports nothing from the project.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def unexpired_keys(answer: dict, now_usec: int) -> list[str]:
    profiles = answer.get("loginProfiles") or [{}]
    keys = (profiles[0].get("sshPublicKeys") or {}).values()
    return [entry["key"] for entry in keys
            if entry.get("key") and int(entry.get("expirationTimeUsec") or 2**63) > now_usec]


def metadata(base: str, path: str, **query: str) -> dict:
    request = urllib.request.Request(
        f"{base}/computeMetadata/v1/oslogin/{path}?{urllib.parse.urlencode(query)}",
        headers={"Metadata-Flavor": "Google"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.load(response)


def main(base: str, username: str) -> None:
    try:
        answer = metadata(base, "users", username=username)
        email = (answer.get("loginProfiles") or [{}])[0].get("name", "")
        if not metadata(base, "authorize", email=email, policy="login").get("success"):
            return
    except (urllib.error.URLError, ValueError):
        return
    for key in unexpired_keys(answer, int(time.time() * 1e6)):
        print(key)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
