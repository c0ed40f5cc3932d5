"""Tests of infra/: the Pulumi program's resources and the worker groups' providers."""
