"""Many "nodes" on one machine for the fan-out tests and bench: real sshds on one port, each
listening on up to 16 loopback addresses (127.0.0.0/8 all reaches `lo`; sshd's
MAX_LISTEN_SOCKS is 16), the head at 127.0.0.1 and worker N at 127.0.0.(N+1), one login key
for all. Workers are reached as on GCE: through the head (a jump host), by internal address.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from tests.support.sshd_server import LocalSshd, pin_host_key, stack_outputs_for

ADDRESSES_PER_SSHD = 16  # sshd refuses more: "Too many listen sockets. Enlarge MAX_LISTEN_SOCKS"
HEAD = "ray-local-head-0000"


def worker_address(index: int) -> str:
    """Worker `index` (0-based)'s loopback address: 127.0.0.2 onwards."""
    number = index + 2
    return f"127.{number // 65536}.{number // 256 % 256}.{number % 256}"


def worker_name(index: int) -> str:
    return f"ray-local-worker-{index + 1:04d}"


@contextlib.contextmanager
def sshd_fleet(sshd_class: type[LocalSshd], workdir: Path, workers: int,
               set_env: dict[str, str] | None = None) -> Iterator[list[LocalSshd]]:
    """Started sshds serving the head's address and `workers` workers' (the head's first),
    their sessions given `set_env` (LocalSshd's), stopped after."""
    addresses = ["127.0.0.1", *(worker_address(index) for index in range(workers))]
    servers: list[LocalSshd] = []
    try:
        for start in range(0, len(addresses), ADDRESSES_PER_SSHD):
            folder = workdir / f"sshd-{start // ADDRESSES_PER_SSHD}"
            folder.mkdir()
            first = servers[0] if servers else None
            servers.append(sshd_class(
                folder, set_env=set_env,
                addresses=tuple(addresses[start:start + ADDRESSES_PER_SSHD]),
                port=first.port if first else None,
                user_key=first.user_key if first else None).start())
        yield servers
    finally:
        for server in servers:
            server.stop()


def fleet_outputs(servers: list[LocalSshd], workers: int, **overrides) -> dict:
    """Stack outputs listing the head and `workers` workers, each at its own address."""
    nodes = [{"name": HEAD, "node_type": "ray_head_default", "kind": "head",
              "internal_ip": "127.0.0.1", "external_ip": "127.0.0.1", "status": "RUNNING"}]
    nodes += [{"name": worker_name(index), "node_type": "ray_worker_small", "kind": "worker",
               "internal_ip": worker_address(index), "external_ip": None, "status": "RUNNING"}
              for index in range(workers)]
    return stack_outputs_for(servers[0], nodes=nodes, **overrides)


def pin_fleet(state_dir: Path, stack: str, servers: list[LocalSshd]) -> None:
    """Every address's host key pinned, as `--trust-first-use` once would leave them."""
    for server in servers:
        for address in server.addresses:
            pin_host_key(state_dir, stack, server, host=address)
