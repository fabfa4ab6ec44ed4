"""GET /replay/ui: a status page, server-rendered, refreshing itself every few seconds.

Every session with its progress through the script, and a timeline of its recent requests
(scripted, forwarded, recorded, stopped, divergent, failed), newest first, a page at a time. A
diverged session shows the recorded and the received text side by side, the stretch that differs
marked, with its JSON path, the verdict and the masks that would cover it. No build step, no
script: HTML and CSS.
With an admin token, a browser without the sign-in cookie is asked for the token by a form that
POSTs it (never in the address, which browsers and servers keep); the cookie it gets holds a
signature made with the token, not the token. The bare address (GET /) leads here.
"""

from __future__ import annotations

import shlex
import time
from html import escape
from typing import Any
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from proxy import admin_token
from proxy.errors import BadRequest, Unauthorized
from proxy.http.admin import ADMIN_COOKIE, require_token, token_matches
from proxy.http.body import read_body
from proxy.runtime import Runtime
from proxy.serving import Source
from proxy.sessions.status import iso, phase
from proxy.store.state import Event, SessionState

router = APIRouter(prefix="/replay")
root = APIRouter()

SHOWN_SESSIONS = 100  # a page
TIMELINE = 40  # events per session
REFRESH_SECONDS = 2
COLORS: dict[str, str] = {
    Source.SCRIPTED: "#2e7d32",
    Source.UPSTREAM: "#1565c0",
    Source.RECORDED: "#00838f",
    Source.STOP: "#6a1b9a",
    Source.DIVERGED: "#c62828",
    Source.ERROR: "#4e342e",
    Source.REFUSED: "#ad1457",
    Source.FAULT: "#ef6c00",
}
PHASES = ("replaying", "served", "stopped", "live", "diverged", "unscripted")


@router.get("/ui", include_in_schema=False, response_model=None)
async def ui(request: Request, cursor: str | None = None) -> Response:
    try:
        await require_token(request)
    except Unauthorized:
        if "text/html" not in request.headers.get("accept", ""):
            raise  # an API client gets the error in the API's shape
        addressed = "token" in request.query_params  # an old link: said, never read
        return _sign_in(SIGN_IN_ADDRESS if addressed else None)
    return await _page(request, cursor)


@router.post("/ui", include_in_schema=False, response_model=None)
async def ui_sign_in(request: Request) -> Response:
    """The sign-in form's POST (token=...): a cookie that says the browser knew the token."""
    runtime: Runtime = request.app.state.runtime
    runtime.guard.admin(request.headers)  # a form posted from another site's page is refused
    token = runtime.settings.admin_token
    if token is None:
        return RedirectResponse("/replay/ui", status_code=303)  # nothing to sign in to
    body = await read_body(request, SIGN_IN_BYTES)
    try:
        given = parse_qs(body.decode("latin-1"), max_num_fields=4).get("token", [""])[0]
    except ValueError:  # more fields than a sign-in form has
        given = ""
    if not token_matches(runtime, given):
        return _sign_in(SIGN_IN_WRONG)
    response = RedirectResponse("/replay/ui", status_code=303)
    response.set_cookie(
        ADMIN_COOKIE,
        admin_token.sign_in(token.get_secret_value(), time.time()),
        max_age=admin_token.SIGN_IN_SECONDS,
        httponly=True,
        samesite="strict",
        path="/replay",
    )
    return response


@root.get("/", include_in_schema=False)
async def home() -> RedirectResponse:
    """The bare address, as a browser opens it: the status page."""
    return RedirectResponse("/replay/ui", status_code=307)


SIGN_IN_BYTES = 4096
SIGN_IN_WRONG = "That is not this proxy's admin token."
SIGN_IN_ADDRESS = (
    "The admin token is not read from the address (browsers keep addresses in their history, "
    "and servers in their logs): enter it here."
)


def _sign_in(said: str | None) -> HTMLResponse:
    """A browser cannot send an Authorization header: it is asked for the admin token, which
    the form POSTs, and a cookie keeps it signed in."""
    note = f"<p class=wrong>{said}</p>" if said else ""  # one of the texts above
    return HTMLResponse(
        "<!doctype html><html><head><meta charset=utf-8><title>replay-proxy: sign in</title>"
        "<style>body{font:15px system-ui,sans-serif;margin:3em auto;max-width:30em}"
        ".wrong{color:#c62828}input{font:inherit}</style></head><body>"
        "<h1>replay-proxy</h1><p>This proxy has an admin token (<code>--admin-token</code>, or "
        "the one it made at start, in the file its start line names). Enter it to see the "
        "status page; a cookie keeps you signed in.</p>"
        f"{note}<form method=post action=/replay/ui><label>Admin token "
        "<input type=password name=token autocomplete=current-password autofocus required>"
        "</label> <button>Show the status page</button></form></body></html>",
        status_code=401,
    )


async def _page(request: Request, cursor: str | None) -> HTMLResponse:
    runtime: Runtime = request.app.state.runtime
    try:
        states, following = await runtime.store.page(cursor, SHOWN_SESSIONS, newest_first=True)
    except ValueError as exc:
        raise BadRequest(f"cursor: {exc}", param="cursor") from None
    total = await runtime.store.count()
    events = await runtime.store.events(limit=5000)
    by_session: dict[str, list[Event]] = {}
    for event in events:
        by_session.setdefault(event["session"], []).append(event)
    counts = {p: 0 for p in PHASES}
    for state in states:
        counts[phase(state)] = counts.get(phase(state), 0) + 1
    rows = "".join(_row(s, by_session.get(s.id, [])[-TIMELINE:]) for s in states)
    summary = " · ".join(f"{n} {p}" for p, n in counts.items() if n)
    if cursor is not None or following is not None:
        summary = f"this page: {summary or 'none'}"
    legend = "".join(
        f'<span class="chip" style="background:{c}"></span>{escape(k)} ' for k, c in COLORS.items()
    )
    links = []
    if cursor is not None:
        links.append('<a href="/replay/ui">newest</a>')
    if following is not None:
        links.append(f'<a href="/replay/ui?cursor={quote(following)}">older sessions</a>')
    more = f'<p class="pages">{" · ".join(links)}</p>' if links else ""
    html = PAGE.format(
        refresh=REFRESH_SECONDS,
        total=total,
        summary=escape(summary) or "no sessions yet",
        legend=legend,
        rows=rows
        or '<tr><td colspan="6" class="empty">No session has made a request yet.</td></tr>',
        more=more,
        now=escape(iso(time.time()) or ""),
    )
    return HTMLResponse(html, headers={"cache-control": "no-store"})


def _row(state: SessionState, events: list[Event]) -> str:
    total = state.turns_planned
    served = state.turns_served
    percent = int(100 * served / total) if total else 0
    branch = ""
    if state.replay_turns is not None:
        branch = f" · branch at turn {state.replay_turns} of {state.turns_total}"
    if state.live_after_turn is not None:
        branch += f" · live after turn {state.live_after_turn}"
    script = "—"
    if state.script_name is not None:
        script = f"{escape(state.script_name)} <small>({escape(state.script_source or '')})</small>"
    forwarded = (
        ", ".join(f"{escape(k)} {v}" for k, v in sorted(state.forwarded.items()) if v) or "—"
    )
    injected = ""
    if state.upstream is not None:  # an upstream per session: where this one's calls went
        injected = f"<br>live at <code>{escape(state.upstream)}</code>"
    for agent in state.subagents[-5:]:  # a subagent lane: its requests, under its parent
        child = agent.get("child") or "a subagent"
        kind = f" ({agent['kind']})" if agent.get("kind") else ""
        injected += (
            f'<br><span class="subagent">subagent <code>{escape(str(child))}</code>{escape(kind)}'
            f" of <code>{escape(str(agent.get('parent')))}</code>: {agent.get('requests', 0)}"
            " requests</span>"
        )
    if len(state.subagents) > 5:
        injected += f"<br>and {len(state.subagents) - 5} more subagents"
    if state.injected:
        latest = ", ".join(f"{i['kind']} at turn {i['turn']}" for i in state.injected[-5:])
        injected += f"<br>faults injected: {len(state.injected)} ({escape(latest)})"
    problem = ""
    if state.divergence is not None:
        problem = f'<div class="problem">turn {state.divergence.get("turn")}: {escape(str(state.divergence.get("path") or ""))}</div>'
    drawn = state.divergence or state.observation or state.volatile
    shown = ""
    if drawn is not None:
        shown = '<tr class="divergence"><td colspan="6">' + _drawn(drawn) + "</td></tr>"
    chips = "".join(_chip(e) for e in events)
    return (
        _session(state, problem, script, percent, served, total, branch, forwarded, injected, chips)
        + shown
    )


def _drawn(d: dict[str, Any]) -> str:
    """A divergence drawn: where, the verdict, the masks, and both texts with the stretch that
    differs marked (only the excerpts around it: a long conversation stays one box)."""
    verdict = str(d.get("verdict") or "changed")
    masks = d.get("masks") or []
    head = (
        f'<span class="verdict {escape(verdict)}">{escape(verdict)}</span> '
        f"{escape(str(d.get('kind', '')))} at turn {escape(str(d.get('turn', '')))}: "
        f"<code>{escape(str(d.get('path') or '$'))}</code> · {escape(str(d.get('reason', '')))}"
    )
    if masks:
        head += "<br>would be covered by " + ", ".join(
            f"<code>--mask {escape(shlex.quote(str(m.get('mask', ''))))}</code> ({escape(str(m.get('what', '')))})"
            for m in masks
        )
    excerpts = d.get("excerpts")
    if not isinstance(excerpts, dict):
        sides = (str(d.get("expected", "")), str(d.get("actual", "")))
        body = "".join(f"<pre>{escape(text)}</pre>" for text in sides)
    else:
        body = "".join(
            _side(label, excerpts.get(key) or {})
            for label, key in (("recorded", "expected"), ("received", "actual"))
        )
    return f'<div class="drawn">{head}<div class="sides">{body}</div></div>'


def _side(label: str, excerpt: dict[str, Any]) -> str:
    text = str(excerpt.get("text", ""))
    start, end = int(excerpt.get("start", 0)), int(excerpt.get("end", 0))
    offset = int(excerpt.get("offset", 0))
    lead = "…" if offset else ""
    marked = (
        f"{lead}{escape(text[:start])}<mark>{escape(text[start:end]) or '∅'}</mark>"
        f"{escape(text[end:])}"
    )
    return f'<div class="side"><div class="label">{label}</div><pre>{marked}</pre></div>'


def _session(
    state: SessionState,
    problem: str,
    script: str,
    percent: int,
    served: int,
    total: int,
    branch: str,
    forwarded: str,
    injected: str,
    chips: str,
) -> str:
    return (
        f'<tr class="session" data-phase="{escape(phase(state))}">'
        f'<td><a href="/replay/sessions/{quote(state.id, safe="")}" title="the full status, as JSON">'
        f"<code>{escape(state.id)}</code></a>{problem}</td>"
        f'<td><span class="phase {escape(phase(state))}">{escape(phase(state))}</span></td>'
        f"<td>{script}</td>"
        f'<td><div class="bar"><div class="fill" style="width:{percent}%"></div></div>'
        f"<small>{served}/{total} turns · {state.scripted_responses} scripted answers{branch}</small></td>"
        f"<td><small>forwarded: {forwarded}<br>errors: {state.errors}{injected}</small></td>"
        f'<td class="timeline">{chips}</td>'
        "</tr>"
    )


def _chip(event: dict[str, Any]) -> str:
    source = str(event.get("source", ""))
    title = f"{iso(event.get('at'))} {event.get('lane')} {source} {event.get('turn')} {event.get('detail', '')}"
    color = COLORS.get(source, "#757575")
    return f'<span class="chip {escape(source)}" style="background:{color}" title="{escape(title)}"></span>'


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{refresh}">
<title>replay-proxy: {total} sessions</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 1.5rem; color: #212121; }}
h1 {{ font-size: 1.3rem; margin: 0 0 .3rem; }}
table {{ border-collapse: collapse; width: 100%; margin-top: 1rem; }}
th, td {{ text-align: left; padding: .45rem .6rem; border-bottom: 1px solid #e0e0e0; vertical-align: top; }}
th {{ font-weight: 600; background: #fafafa; }}
.bar {{ width: 160px; height: 12px; background: #e0e0e0; border-radius: 6px; overflow: hidden; }}
.fill {{ height: 100%; background: #2e7d32; }}
.phase {{ padding: .1rem .45rem; border-radius: .6rem; background: #eeeeee; }}
.phase.live {{ background: #bbdefb; }} .phase.diverged {{ background: #ffcdd2; }}
.phase.served, .phase.stopped {{ background: #c8e6c9; }} .phase.replaying {{ background: #fff9c4; }}
.chip {{ display: inline-block; width: 12px; height: 12px; margin: 1px; border-radius: 2px; }}
.problem {{ color: #c62828; font-size: 12px; }}
.empty {{ color: #757575; text-align: center; padding: 2rem; }}
.legend {{ color: #616161; }}
tr.divergence td {{ padding-top: 0; }}
.drawn {{ font-size: 12px; background: #fafafa; border-left: 3px solid #c62828; padding: .4rem .6rem; }}
.sides {{ display: flex; gap: .6rem; margin-top: .3rem; }}
.side {{ flex: 1; min-width: 0; }}
.side .label {{ color: #616161; }}
.drawn pre {{ white-space: pre-wrap; word-break: break-all; max-height: 14rem; overflow: auto;
  margin: .2rem 0; padding: .3rem; background: #fff; border: 1px solid #e0e0e0; }}
mark {{ background: #ffd54f; }}
.verdict {{ padding: .05rem .4rem; border-radius: .5rem; color: #fff; background: #c62828; }}
.verdict.volatile {{ background: #ef6c00; }}
</style></head>
<body>
<h1>replay-proxy</h1>
<div>{total} sessions: {summary}</div>
<div class="legend">timeline: {legend}(newest right; hover for details)</div>
<table id="sessions">
<thead><tr><th>session</th><th>phase</th><th>script</th><th>progress</th><th>requests</th><th>timeline</th></tr></thead>
<tbody>{rows}</tbody>
</table>
{more}
<p class="legend">as of {now}; refreshes every {refresh} s</p>
</body></html>
"""
