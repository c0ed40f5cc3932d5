"""Tests through the pinned pulumi engine: the program, state and CLI as users run them."""
