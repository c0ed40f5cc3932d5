"""The program runner: `python program.py --monitor ... PROGRAM [ARGS]`, run by host.py in the
project's virtualenv, as the real host runs its `pulumi-language-python-exec`.

It configures the pulumi SDK of that virtualenv (resource monitor, engine, project, stack,
organization, root folder, dry run, parallelism; the config and its secret keys from
PULUMI_CONFIG / PULUMI_CONFIG_SECRET_KEYS), then runs PROGRAM (a file, or a folder with a
`__main__.py`) as `__main__` inside the stack. A failure the SDK already reported to the engine
exits with BAILED, which the host turns into a bail (no second message).
This file runs outside the test tree's interpreter: it imports the SDK only.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import runpy
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor

import pulumi
import pulumi.runtime
from pulumi.errors import RunError

BAILED = 32  # the exit code the host reads as "already reported to the engine"


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="run a Pulumi Python program")
    for name in ("monitor", "engine", "project", "stack", "organization", "root_directory",
                 "pwd"):
        parser.add_argument(f"--{name}")
    parser.add_argument("--dry_run", default="false")
    parser.add_argument("--parallel", type=int, default=0)
    parser.add_argument("program")
    parser.add_argument("args", nargs="*")
    return parser.parse_args(argv)


def configure(args: argparse.Namespace) -> pulumi.runtime.Settings:
    pulumi.runtime.set_all_config(pulumi.runtime.get_config_env(),
                                  pulumi.runtime.get_config_secret_keys_env())
    settings = pulumi.runtime.Settings(
        project=args.project, stack=args.stack, monitor=args.monitor, engine=args.engine,
        parallel=args.parallel, dry_run=args.dry_run == "true",
        organization=args.organization, root_directory=args.root_directory)
    pulumi.runtime.configure(settings)
    return settings


def main(argv: list[str]) -> int:
    args = arguments(argv)
    settings = configure(args)
    program = os.path.abspath(args.program)
    if args.pwd:
        os.chdir(args.pwd)
    sys.argv = [program, *args.args]
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    loop.set_default_executor(ThreadPoolExecutor(max_workers=max(settings.parallel or 1, 1) * 4))
    # Unresolved outputs of a failed program are expected; asyncio's complaints about them
    # are noise to the user.
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    try:
        loop.run_until_complete(pulumi.runtime.run_in_stack(
            lambda: runpy.run_path(program, run_name="__main__")))
    except RunError as error:
        pulumi.log.error(str(error))
        return BAILED
    except Exception:  # noqa: BLE001 - the user's program failed: the engine shows why
        pulumi.log.error(f"Program failed with an unhandled exception:\n{traceback.format_exc()}")
        return BAILED
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
