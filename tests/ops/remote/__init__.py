"""Tests of ops/remote: SSH, sync, sessions on the nodes."""
