"""The HTTP edge over real sockets: framing, limits, the session in the URL (proxy/http/)."""
