"""Tests of ops/adopt: a cluster `ray up` made, taken into a stack."""
