"""replay-proxy: an OpenAI-compatible proxy that replays saved agent trajectories.

One request's way through, and the folder that takes each step:

    uvicorn (HTTP/1.1 framing)
      -> http/front.py          the ASGI entry: the hot paths as plain ASGI, the rest FastAPI
      -> http/incoming.py       the request as the hot path reads it: bounded body, target as sent
      -> apis/<api>.py          parse: the body -> a Conversation (one module per API, the Api table)
      -> sessions/registry.py   which script the session has (bound once, kept in store/)
      -> replay/engine.py       decide, pure: a scripted turn, a divergence, stop, or go live
      -> store/                 the decision recorded in the session's state, atomically
      -> serving/outcome.py     what the decision means: an answer, a fault, a refusal, or live
      -> apis/<api>.py          render: the turn as JSON or SSE events (sent by http/answers.py)
         or upstream/           forward: the request as it came, the answer passed through
      -> recording/             with --record-dir / --dump-dir: the exchange written down

The words (trajectory, session, turn, lane, divergence, live, ...) are defined once, in
docs/glossary.md.
"""

__version__ = "0.1.0"
