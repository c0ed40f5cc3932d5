"""The node provider the head's Ray autoscaler runs (`provider.type: external`), shipped to
the head as a zip in the `ray-head-provider` metadata entry (bootstrap/head_provider_metadata.py)
and imported there as `ray_gcp_head_provider`, by v1's StandardAutoscaler and v2's
NodeProviderAdapter alike.

Owns: `provider.HeadNodeProvider`, Ray's GCPNodeProvider with its listing, names, labels and
launch hashes inherited, whose `create_node` runs the checks in `launch_checks` (the spend
cap's, `spend_gate.SpendGate`, and the refusal of a pinned twin) and then launches through
`launch.launch_nodes`, and which never terminates a node Pulumi keeps; `capacity`, the pure
rules of spot with on-demand fallback, and `ladder`, those of the capacity ladder (each rung's
insert body, which refusals move a node down), that the workers Pulumi keeps (infra/workers)
share;
`spend`, the spend accounting (hours run, the hourly projection, the head's ledger, the launch
rule) that `invoke cost` shares; `rate_limits`, Google's rate-quota answers and the wait for
their window, that every Compute call path of ours shares (infra/workers/retry.py), and
`paged`, Ray's compute client made to read every list page and wait those out; `pinned`, how
autoscaler v2 counts the workers Pulumi keeps (their types' pinned twins, which the provider's
`node_tags` reports them as), shared with the head's config (autoscaler_config) and startup
script; and `instance_metadata`, the node's metadata server. `capacity`, `ladder`, `spend`,
`pinned`, `instance_metadata`, `rate_limits` and `paged` are standard library only: the
operator's side imports them without Ray, and the head's autostop daemon
(bootstrap/autostop.py) imports what it needs from its own copy of this package.

May import: the standard library, Ray and what `ray[default]` and Ray's GCP extras bring, and
its own modules by relative imports (the head has none of the project's packages, and the
package's name there is not `bootstrap.head_provider`). This file imports nothing, so
importing `capacity` or `pinned` does not import Ray.
"""
