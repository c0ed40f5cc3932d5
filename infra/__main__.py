"""Pulumi entry point (`main: infra/` in Pulumi.yaml)."""

from infra.program import run_program
from model.quick_exit import skip_the_last_collection

skip_the_last_collection()
run_program()
