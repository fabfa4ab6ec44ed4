"""Forwarding to the upstream over real sockets (mirrors proxy/upstream/)."""
