"""The node provider the head's Ray autoscaler runs (`provider.type: external`), shipped to
the head as a zip in the `ray-head-provider` metadata entry (bootstrap/head_provider_metadata.py)
and imported there as `ray_gcp_head_provider`, by v1's StandardAutoscaler and v2's
NodeProviderAdapter alike.

Owns: `provider.HeadNodeProvider`, Ray's GCPNodeProvider with every verb inherited (names,
labels, launch hashes and listing stay Ray's), whose `create_node` runs the checks in
`launch_checks` (the spend cap's, `spend_gate.SpendGate`) and then launches through
`launch.launch_nodes`; `capacity`, the pure rules of spot with on-demand fallback that the
workers Pulumi keeps (infra/workers) share; `spend`, the spend accounting (hours run, the
hourly projection, the head's ledger, the launch rule) that `invoke cost` shares; and
`instance_metadata`, the node's metadata server. `capacity`, `spend` and `instance_metadata`
are standard library only: the head's autostop daemon (bootstrap/autostop.py) imports them
from its own copy of this package.

May import: the standard library, Ray and what `ray[default]` and Ray's GCP extras bring, and
its own modules by relative imports (the head has none of the project's packages, and the
package's name there is not `bootstrap.head_provider`). This file imports nothing, so
importing `capacity` from infra does not import Ray.
"""
