"""Sessions over real sockets: binding, trajectories loaded later, expiry (proxy/sessions/)."""
