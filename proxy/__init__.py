"""replay-proxy: an OpenAI-compatible proxy that replays saved agent trajectories."""

__version__ = "0.1.0"
