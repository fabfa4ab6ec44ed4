"""Pure tests: no sockets, no processes; each mirrors the package it tests."""
