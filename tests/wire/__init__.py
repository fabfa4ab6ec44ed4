"""Real sockets: the proxy under uvicorn, fake upstreams, the official SDKs as clients.

The folders mirror proxy/ (apis/, http/, upstream/, ...), each file under the folder its main
subject lives in; the files here test the top-level modules (guard.py, nesting.py, app.py and
errors.py, names.py, metrics.py and logs.py)."""
