"""The APIs end to end over real sockets, with the official SDKs (mirrors proxy/apis/)."""
