"""Sessions: which script each agent session gets, and the record of what each request got.

    registry.py  Sessions: binding a script to a session, recording each decision in the store
    library.py   the trajectories this proxy can serve (files, a folder, admin scripts)
    children.py  which recorded child a live subagent replays, and the lane it replays in
    verdict.py   what the requests showed of the workspace, and the restore verdict settled from it
    status.py    a session's status report: served, skipped, dropped, diverged, returned
    cache.py     parsed trajectories kept for reuse, bounded by their files' bytes
    expiry.py    sessions idle for --session-ttl forgotten, by a sweep of each worker

The state itself lives in a store (proxy.store): memory, SQLite or Redis.
"""
