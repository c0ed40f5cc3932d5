"""Run many `invoke` command lines in this one interpreter and print what each showed, as JSON.

`python tests/support/task_runner.py '[["plan", "-s", "x"], ...]'`: each entry goes through
invoke's own
`Program` (parsing, help, Exit handling) as from the shell; an exception escaping it is
printed as the shell would show it, traceback and all, so tests can look for one. One process
for all the command lines keeps the bad-input tests fast.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback


def run(argv: list[str]) -> dict[str, object]:
    from invoke import Collection, Program

    import tasks

    out, err = io.StringIO(), io.StringIO()
    code: object = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            Program(namespace=Collection.from_module(tasks), name="invoke").run(
                ["invoke", *argv], exit=True)
        except SystemExit as exited:
            code = exited.code if exited.code is not None else 0
        except BaseException:  # noqa: BLE001 - shown as the shell would show it
            traceback.print_exc()
            code = 1
    return {"argv": argv, "code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


if __name__ == "__main__":
    print(json.dumps([run(argv) for argv in json.loads(sys.argv[1])]))
