"""The Pulumi program: a Ray cluster YAML in, pulumi-gcp resources out."""
