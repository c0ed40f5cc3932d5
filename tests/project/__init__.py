"""Tests of the project as a whole: its import floors, Python floor, benchmarks and docs."""
