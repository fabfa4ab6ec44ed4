"""Real agent harnesses, installed once into a cache and run against the proxy (issue: e2e)."""
