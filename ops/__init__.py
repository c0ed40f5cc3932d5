"""Day-two operations on a deployed stack: SSH, SFTP sync, attach, status, pulumi lifecycle.

The invoke tasks in tasks.py are thin wrappers over these modules, so tests call them directly.
Heavy imports (pulumi, pydantic) stay inside the functions that need them: `invoke exec` must
start fast.
"""
