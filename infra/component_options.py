"""What a component's own resources inherit from the component's options."""

from __future__ import annotations

import pulumi


def waits_for(opts: pulumi.ResourceOptions | None) -> pulumi.Input[list[pulumi.Resource]] | None:
    """The component's `depends_on`, for the resources it creates first: Pulumi does not make a
    component's children wait for what the component depends on, and every resource of the
    cluster must wait for the sweeper's claim (infra/workers/sweeper.py)."""
    return opts.depends_on if opts is not None else None
