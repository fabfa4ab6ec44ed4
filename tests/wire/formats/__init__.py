"""Harness logs and published rollouts served over real sockets (mirrors proxy/formats/)."""
