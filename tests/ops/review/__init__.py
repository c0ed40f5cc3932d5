"""Tests of ops/review: plans, diffs and their prices."""
