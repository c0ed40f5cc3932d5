"""`python -m tests.standin_gcp`: serve, printing the port (what pulumi-resource-gcp runs)."""

from tests.standin_gcp.server import serve

serve()
