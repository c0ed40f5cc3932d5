"""Tests of policy/: the guardrails pack and its review."""
