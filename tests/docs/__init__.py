"""Tests of the docs site: it builds strict, its examples plan, its tables and names match
the code."""
