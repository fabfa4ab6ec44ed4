"""The replay core, step by step."""
