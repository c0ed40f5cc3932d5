"""The commands a startup script runs, and a unified diff of them between two scripts: what
`invoke diff` shows for a changed script instead of a line count. A rendered script (see
bootstrap/startup_script.py) runs each YAML command as `run_host '<cmd>'` or `run_node '<cmd>'`
inside its stage; the commands come back as the YAML wrote them, each under its stage's name.
File mounts are named by their archive's keyed hash only, never by their content."""

from __future__ import annotations

import difflib
import re

_STAGE = re.compile(r"^if stage (\S+) ")
_COMMAND = re.compile(r"^\s+run_(?:host|node) '(.*)'$")
_RESTART = "if restart_ray "
QUOTE = "'"
_QUOTED_QUOTE = "'\"'\"'"  # how the renderer writes a ' inside single quotes
CONTEXT = 1


def script_commands(script: str) -> list[str]:
    """`[stage] command` for each YAML command the script runs, in order."""
    stage, commands = "", []
    for line in script.splitlines():
        if match := _STAGE.match(line):
            stage = match.group(1)
        elif line.startswith(_RESTART):
            stage = "ray-start"
        elif match := _COMMAND.match(line):
            commands.append(f"[{stage}] {match.group(1).replace(_QUOTED_QUOTE, QUOTE)}")
    return commands


def command_diff(old: str, new: str) -> list[str]:
    """Unified diff lines (`-`, `+`, ` ` context, `@@` hunks) of the two scripts' commands;
    empty when the commands are the same."""
    lines = difflib.unified_diff(script_commands(old), script_commands(new), lineterm="",
                                 n=CONTEXT)
    return [line for line in lines if not line.startswith(("---", "+++"))]
