"""Day-two operations on a deployed stack: SSH (directly or through a tunnel such as IAP,
with OS Login), SFTP sync, attach, status, pulumi lifecycle, pre-flight checks.

The invoke tasks in tasks.py are thin wrappers over these modules, so tests call them directly.
Heavy imports (pulumi, pydantic) stay inside the functions that need them: `invoke exec` must
start fast.
"""
