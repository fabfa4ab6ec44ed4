"""replay-proxy: an OpenAI-compatible proxy that replays saved agent trajectories.

One request's way through, and the folder that takes each step:

    uvicorn (HTTP/1.1 framing)
      -> http/front.py          the ASGI entry: the hot paths as plain ASGI, the rest FastAPI
      -> http/incoming.py       the request as the hot path reads it: bounded body, target as sent
      -> apis/<api>.py          parse: the body -> a Conversation (chat, responses, anthropic, gemini)
      -> sessions/registry.py   which script the session has (bound once, kept in store/)
      -> replay/engine.py       decide, pure: a scripted turn, a divergence, stop, or go live
      -> store/                 the decision recorded in the session's state, atomically
      -> apis/<api>.py          render: the turn as JSON or SSE events (sent by http/answers.py)
         or upstream/           forward: the request as it came, the answer passed through
      -> recording/             with --record-dir / --dump-dir: the exchange written down

The words used throughout:

- trajectory: a saved run (replay/trajectory.py); its assistant turns are the script, and
  formats/ reads every format it comes in.
- session: one agent run, keyed by a session header or a fingerprint of the conversation.
- turn: one scripted assistant message; when a request's history holds the first k turns, turn
  k+1 is due, so a retried request gets the same turn again.
- lane: main (requests with tools take turns), toolless and subagent (never take a turn); a
  tool-less request of a text-based script's own conversation (a harness that calls its tools
  through text) is main.
- divergence: a history that disagrees with the script; strict mode makes every difference one.
- live: forwarded to the real LLM, once the script is used up or the session diverged.
"""

__version__ = "0.1.0"
