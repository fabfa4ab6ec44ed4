"""Real sockets: the proxy under uvicorn, fake upstreams, the official SDKs as clients."""
