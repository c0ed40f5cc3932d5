"""A stand-in `gcloud` for `compute start-iap-tunnel ... --listen-on-stdin` only.

It checks its argument vector against the documented form (cloud.google.com/sdk/gcloud/
reference/compute/start-iap-tunnel: `INSTANCE_NAME INSTANCE_PORT [--zone=ZONE]`, the gcloud-
wide `--project`, and `--listen-on-stdin`, the flag `gcloud compute ssh --tunnel-through-iap`
uses to relay stdin/stdout instead of listening on a local port), appends it as one JSON line
to $IAP_STANDIN_LOG, and relays stdin/stdout to INSTANCE_PORT on the address
$IAP_STANDIN_TARGETS (JSON: {"project": P, "zone": Z, "instances": {NAME: HOST}}) gives the
instance, as IAP relays to the instance's port. Anything else exits 2 with gcloud's kind of message.

`tests/ops/remote/test_private_ssh_tasks.py` puts a `gcloud` wrapper running this file on PATH.
Imports nothing from the project.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gcloud", allow_abbrev=False)
    parser.add_argument("group", choices=["compute"])
    parser.add_argument("command", choices=["start-iap-tunnel"])
    parser.add_argument("instance_name")
    parser.add_argument("instance_port", type=int)
    parser.add_argument("--listen-on-stdin", action="store_true", required=True)
    parser.add_argument("--zone", required=True)
    parser.add_argument("--project", required=True)
    return parser.parse_args(argv)


def relay(connection: socket.socket) -> None:
    def upstream() -> None:
        while data := os.read(0, 65536):
            connection.sendall(data)
        connection.shutdown(socket.SHUT_WR)

    threading.Thread(target=upstream, daemon=True).start()
    while data := connection.recv(65536):
        os.write(1, data)


def main(argv: list[str]) -> int:
    args = parse(argv)
    targets = json.loads(os.environ["IAP_STANDIN_TARGETS"])
    with open(os.environ["IAP_STANDIN_LOG"], "a") as log:
        log.write(json.dumps(argv) + "\n")
    if (args.project, args.zone) != (targets["project"], targets["zone"]):
        print(f"ERROR: (gcloud.compute.start-iap-tunnel) Could not fetch resource: The resource "
              f"'projects/{args.project}/zones/{args.zone}/instances/{args.instance_name}' was "
              "not found", file=sys.stderr)
        return 1
    host = targets["instances"].get(args.instance_name)
    try:
        if host is None:
            raise OSError("no such instance")
        connection = socket.create_connection((host, args.instance_port))
    except OSError:
        print(f"ERROR: (gcloud.compute.start-iap-tunnel) Error while connecting [4003: "
              f"'failed to connect to backend']. {args.instance_name}:{args.instance_port}",
              file=sys.stderr)
        return 1
    with connection:
        relay(connection)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
