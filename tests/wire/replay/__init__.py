"""The replay rules over real sockets: conversations, faults, text-based scripts, verdicts
(proxy/replay/)."""
