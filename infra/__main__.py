"""Pulumi entry point (`main: infra/` in Pulumi.yaml)."""

from infra.program import run_program

run_program()
