"""Whole runs: real harnesses, the command line, a browser, the soak, workers and replicas."""
