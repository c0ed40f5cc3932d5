"""Tests of tasks.py: the invoke tasks as a user types them."""
