"""Tests of ops/cloud: status, cost and what the tasks read from the cloud."""
