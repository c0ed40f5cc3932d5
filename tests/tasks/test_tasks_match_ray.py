"""A task named like a `ray` cluster verb spells the flags both have as `ray` does: the same
short letter and the same default. Ray's side is what its click command in the wheel does: the
letters it parses, and the value its function receives when the flag is not given (parsed with
click itself, so no click internals such as how an unset default is represented are read)."""

from __future__ import annotations

from invoke import Collection

# -p is --port-forward in every task (ops/task_flags.py), so `dashboard --port` goes without it.
LETTERS_WE_KEEP_FOR_OURS = {("dashboard", "--port")}


def shared_flags() -> list[tuple[str, str, list[str], object, list[str], object]]:
    """(task, long flag, our short flags, our default, ray's short flags, ray's default)."""
    from ray.scripts.scripts import cli as ray_cli

    import tasks
    shared = []
    for context in Collection.from_module(tasks).to_contexts():
        if context.name not in ray_cli.commands:
            continue
        command = ray_cli.commands[context.name]
        received = command.make_context(context.name, [], resilient_parsing=True).params
        ray_options = {}
        for param in command.params:
            names = param.opts + param.secondary_opts
            for long in (name for name in names if name.startswith("--")):
                ray_options[long] = ([name for name in names if len(name) == 2],
                                     received[param.name])
        for argument in context.args.values():
            long = "--" + argument.names[0]
            if long in ray_options:
                ours = ["-" + name for name in argument.names if len(name) == 1]
                shared.append((context.name, long, ours, argument.default, *ray_options[long]))
    return shared


def test_flags_we_share_with_ray_use_its_short_letters():
    shared = shared_flags()
    assert ("attach", "--new", ["-N"], False, ["-N"], False) in shared
    for task, long, ours, _, rays, _ in shared:
        if (task, long) in LETTERS_WE_KEEP_FOR_OURS:
            assert ours == [], (task, long)
            continue
        assert ours == rays, (task, long)


def test_flags_we_share_with_ray_have_its_defaults():
    for task, long, _, ours, _, rays in shared_flags():
        if isinstance(rays, bool | int | str):
            assert ours == rays, (task, long)
        else:  # Ray's function receives None or () (no value, or a repeatable option): nothing
            assert not ours, (task, long)
