"""Tests of ops/, by its rooms."""
