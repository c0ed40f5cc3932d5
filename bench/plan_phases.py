"""Where `invoke plan`'s CPU time goes, phase by phase, in one interpreter.

`python bench/plan_phases.py STACK ROOT PLAN.json` prints JSON {phase: CPU seconds}: the
imports the floor pays too (pulumi, and the pulumi_gcp modules of the plan's resource types),
then what only `invoke plan` pays: invoke and tasks.py, the project's modules (pydantic models
included), reading and validating the stack file and cluster YAML, running the program under
the mock engine, and writing the JSON.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _timed_define_cluster() -> list[float]:
    """Wrap the program's entry point so its own CPU time is measured apart from the engine's
    (the planner imports `define_cluster` from `infra.program` when it runs)."""
    import infra.program

    spent = [0.0]
    define = infra.program.define_cluster

    def timed() -> object:
        start = time.process_time()
        try:
            return define()
        finally:
            spent[0] += time.process_time() - start

    infra.program.define_cluster = timed
    return spent


def main(stack: str, root: Path, plan_path: Path) -> dict[str, float]:
    spent: dict[str, float] = {}
    clock = time.process_time()

    def phase(name: str) -> None:
        nonlocal clock
        now = time.process_time()
        spent[name] = round(now - clock, 3)
        clock = now

    import pulumi.dynamic  # noqa: F401

    for token in {r["type"] for r in json.loads(plan_path.read_text())["resources"]}:
        if token.startswith("gcp:"):
            _, module, name = token.split(":")
            getattr(importlib.import_module(f"pulumi_gcp.{module.split('/')[0]}"), name)
    phase("pulumi + pulumi_gcp imports (the floor's too)")
    import invoke  # noqa: F401

    import tasks  # noqa: F401
    phase("invoke + tasks.py")
    import infra.program  # noqa: F401
    from ops.review.plan import plan_stack, render_json, resolve_plan_args
    from ops.review.plan_engine import run_program  # noqa: F401
    phase("project modules (pydantic models)")
    from model.config import load_cluster_config
    from model.stack_config import resolve_cluster_path

    _, tree = resolve_plan_args(stack, "json", str(root), None)
    from model.stack_config import check_stack

    load_cluster_config(resolve_cluster_path(check_stack(stack, tree / "stacks", tree)[
        "ray-gcp:cluster"], tree))
    phase("stack file + cluster YAML (read, validate)")
    program_code = _timed_define_cluster()
    planned = plan_stack(stack, tree)
    phase("program under the mock engine")
    spent["  of which the program's own code (define_cluster)"] = round(program_code[0], 3)
    spent["  of which pulumi resolving outputs and registering"] = round(
        spent["program under the mock engine"] - program_code[0], 3)
    render_json(planned)
    phase("JSON")
    return spent


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))))
