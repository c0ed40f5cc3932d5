"""Tests of ops/stacks (ops/ top-level modules until main moves them there): the stack, its
outputs keeper, checkpoint, background processes and environment fixes."""
