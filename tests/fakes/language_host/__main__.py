"""`python -m tests.fakes.language_host [-flags] [ENGINE_ADDRESS]`: serve, printing the port."""

import sys

from tests.fakes.language_host.host import serve

serve(sys.argv[1:])
