"""`python -m tests.fakes.standin_gcp`: serve, printing the port (what pulumi-resource-gcp runs)."""

from tests.fakes.standin_gcp.server import serve

serve()
