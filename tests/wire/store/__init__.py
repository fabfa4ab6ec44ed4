"""The stores against real backends (mirrors proxy/store/)."""
