"""Tests of ops/'s own modules: the stack, its outputs, state and engine."""
