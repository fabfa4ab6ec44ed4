"""Scripted turns -> response bytes, pure, one module per API."""
