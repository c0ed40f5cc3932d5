"""The policy pack Pulumi's analyzer runs (`pulumi preview --policy-pack policy`): each rule of
`policy.rules` as a ResourceValidationPolicy or StackValidationPolicy, its level and parameters
from the pack config (`--policy-pack-config`), defaults from the rule."""

from __future__ import annotations

from collections.abc import Callable

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from policy.rules import RULES, Rule, settings


def _params(rule: Rule, config: object) -> dict[str, object]:
    return settings(rule, {rule.name: dict(config or {})})[1]


def _resource_validation(rule: Rule) -> Callable[[ResourceValidationArgs, ReportViolation],
                                                 None]:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        assert rule.on_resource is not None
        for message in rule.on_resource(args.resource_type, args.props,
                                        _params(rule, args.get_config())):
            report_violation(message, None)
    return validate


def _stack_validation(rule: Rule) -> Callable[[StackValidationArgs, ReportViolation], None]:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        assert rule.on_stack is not None
        resources = [(r.resource_type, r.name, r.props) for r in args.resources]
        urns = {r.name: r.urn for r in args.resources}
        for name, message in rule.on_stack(resources, _params(rule, args.get_config())):
            report_violation(message, urns.get(name))
    return validate


def policy_of(rule: Rule) -> Policy:
    level = EnforcementLevel(rule.level)
    schema = PolicyConfigSchema(
        {key: {**spec, "default": rule.params[key]} for key, spec in rule.schema.items()})
    if rule.on_resource is not None:
        return ResourceValidationPolicy(rule.name, rule.description, _resource_validation(rule),
                                        level, schema)
    return StackValidationPolicy(rule.name, rule.description, _stack_validation(rule), level,
                                 schema)


if __name__ == "__main__":
    PolicyPack("ray-gcp-guardrails", [policy_of(rule) for rule in RULES])
