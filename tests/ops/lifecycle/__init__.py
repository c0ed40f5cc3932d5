"""Tests of ops/lifecycle: up, down, scale, preflight and their checks."""
