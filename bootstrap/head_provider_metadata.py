"""The head's node provider on its way to the head: the package bootstrap/head_provider as a
zip, base64 in metadata `ray-head-provider`, and the provider section that names it.

The head's startup script decodes the entry to `~/ray_head_provider.zip` (and copies it into
the container with docker) and puts that file on the PYTHONPATH of `ray start --head`, whose
autoscaler (monitor) process inherits it and imports the package from the zip as
`ray_gcp_head_provider` (Python's zipimport: no unpacking, one file to replace). The zip is
deterministic (sorted members, a fixed timestamp and mode), so the same package gives the same
entry, and the head's stage re-runs only when the package changed.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import zipfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).with_name("head_provider")
SHIPPED_PACKAGE = "ray_gcp_head_provider"
"""The package's name on the head (its modules import each other relatively)."""
PROVIDER_MODULE = f"{SHIPPED_PACKAGE}.provider.HeadNodeProvider"
"""What `provider.module` names for Ray's `type: external` loader."""
PAYLOAD_KEY = "ray-head-provider"
ARCHIVE_NAME = "ray_head_provider.zip"
"""The file under the home of the user Ray runs as (the container's with docker)."""
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


@functools.cache
def archive() -> bytes:
    """The package's modules as a zip, `ray_gcp_head_provider/<module>.py`."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as packed:
        for path in sorted(PACKAGE_DIR.glob("*.py")):
            member = zipfile.ZipInfo(f"{SHIPPED_PACKAGE}/{path.name}", date_time=_ZIP_TIME)
            member.compress_type = zipfile.ZIP_DEFLATED
            member.external_attr = 0o644 << 16
            packed.writestr(member, path.read_bytes(), compresslevel=9)
    return buffer.getvalue()


def payload() -> str:
    """The zip, base64 on one line: the value of metadata `ray-head-provider`."""
    return base64.b64encode(archive()).decode()


def payload_digest() -> str:
    """A short hash of the package, for the head's stage that installs it."""
    return hashlib.sha256(archive()).hexdigest()[:16]


def head_provider_entries() -> dict[str, str]:
    return {PAYLOAD_KEY: payload()}
