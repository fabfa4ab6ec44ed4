"""Thin HTTP handlers: completions, admin, health, and forwarding of everything else."""
