"""docker run options are data: split into words at plan time, never evaluated on the node.

Every shell metacharacter, in every run_options field, goes through the rendered script with
the stub `docker` (tests/support/bootstrap_stubs.py): no marker file appears, and `docker run` gets
the
legitimate options as the same argv words a shell would have made of them.
"""

from __future__ import annotations

import os
import shlex

import pytest

from bootstrap.startup_script import render_startup_script
from model.config import ConfigError
from tests.support.bootstrap_stubs import cluster, run_script

IMAGE = "rayproject/ray:2.9"
LEGITIMATE = ["--ulimit nofile=65536:65536", "-e 'GREETING=hello world'", "--label a=\"b c\""]
# Each would create marker-<n> if any shell evaluated it.
ATTACKS = [
    "$(touch {m})", "`touch {m}`", "; touch {m}", "&& touch {m}", "|| touch {m}",
    "| touch {m}", "& touch {m}", "\ntouch {m}", "> {m}", "\"$(touch {m})\"",
    "'$(touch {m})'", "${{IFS}}touch${{IFS}}{m}", "-e X=$(touch {m})", "\\$(touch {m})",
]
TYPE_CONFIG = {"resources": {"CPU": 2}, "node_config": {"machineType": "n1-standard-2"}}


def _options(tmp_path) -> list[str]:
    markers = [tmp_path / f"marker-{index}" for index in range(len(ATTACKS))]
    return LEGITIMATE + [attack.format(m=marker) for attack, marker in zip(ATTACKS, markers,
                                                                            strict=True)]


def _config(field: str, options: list[str]):
    docker = {"image": IMAGE, "container_name": "rc"}
    types = {"head_t": dict(TYPE_CONFIG), "worker_t": {**TYPE_CONFIG, "min_workers": 1}}
    if field == "type worker_run_options":
        types["worker_t"]["docker"] = {"worker_run_options": options}
    else:
        docker[field] = options
    return cluster(docker=docker, available_node_types=types)


def _docker_run_argv(tmp_path, script: str) -> list[str]:
    """Run the script with a `docker` in front of the stub that keeps `docker run`'s argv
    exactly (NUL-separated), then hands over to the stub."""
    spy = tmp_path / "spy"
    spy.mkdir()
    argv_file = tmp_path / "docker-run.argv"
    (spy / "docker").write_text(
        "#!/bin/sh\n"
        'if [ "$1" = run ]; then for word in "$@"; do printf \'%s\\0\' "$word"; done'
        ' > "$ARGV_FILE"; fi\n'
        f'exec {shlex.quote(str(tmp_path / "stubs" / "docker"))} "$@"\n'
    )
    (spy / "docker").chmod(0o755)
    env = {"PATH": f"{spy}:{tmp_path / 'stubs'}:{os.environ['PATH']}",
           "ARGV_FILE": str(argv_file), "RAY_HEAD_IP": "10.0.0.9"}
    run = run_script(script, tmp_path, {"ray-head-address": "10.0.0.9"}, env)
    assert run.returncode == 0, run.log
    return argv_file.read_bytes().decode().split("\0")[:-1]


@pytest.mark.parametrize("field, role, node_type", [
    ("run_options", "worker", "worker_t"),
    ("head_run_options", "head", "head_t"),
    ("worker_run_options", "worker", "worker_t"),
    ("type worker_run_options", "worker", "worker_t"),
])
def test_shell_syntax_in_run_options_is_passed_to_docker_not_run(tmp_path, field, role,
                                                                 node_type):
    options = _options(tmp_path)
    script = render_startup_script(_config(field, options), role, node_type)
    argv = _docker_run_argv(tmp_path, script)
    assert sorted(p.name for p in tmp_path.glob("marker-*")) == []
    expected = shlex.split(" ".join(options))
    assert argv[-len(expected) - 2:] == [*expected, IMAGE, "bash"]
    assert argv[argv.index("--ulimit") + 1] == "nofile=65536:65536"
    assert "GREETING=hello world" in argv and "a=b c" in argv


def test_run_option_that_does_not_split_into_words_is_refused():
    with pytest.raises(ConfigError) as caught:
        cluster(docker={"image": IMAGE, "container_name": "ray_container",
                        "worker_run_options": ["--ok", "-e 'A=b"]})
    (path, message), = caught.value.problems
    assert path == "docker.worker_run_options"
    assert "option 1" in message and "no closing quotation" in message
