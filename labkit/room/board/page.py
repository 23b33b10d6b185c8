"""The board's page: the grid of participants × exercises (or one participant's detail), as HTML.

The page keeps itself current without reloading: every CHANGES_S it asks ``api/progress`` and, when that
changed, fetches the page again and swaps its content in place (a hover or a detail being read stays). Its
requests carry JupyterHub's XSRF token: the hub's OAuth accepts a cookie on a script's request only with
it, and answers one without it with its login page, which leads back here: a loop of redirects.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass

from ...course.catalogue import REGISTRY
from . import progress as progress_store
from .progress import Mark, Progress, label

CHANGES_S = 2  # the page asks api/progress this often
SORTS = ("name", "solved")
MARKS = {
    progress_store.PASSED: "\u2713",
    progress_store.NOT_YET: "\u2717",
    progress_store.NOT_STARTED: "\u00b7",
    progress_store.COULD_NOT_JUDGE: "!",
    progress_store.UNREADABLE: "?",
}
# One screen (1600×900) holds 50 participants × every exercise: small type, one mark per cell, the words on hover.
STYLE = """body{font:12px/1.2 sans-serif;margin:6px 10px} h1{font-size:15px;margin:0 0 2px}
p{margin:2px 0} form{display:inline} .top{display:flex;gap:12px;align-items:baseline;flex-wrap:wrap}
table{border-collapse:collapse;font-size:12px;line-height:14px} td,th{border:1px solid #ccc;padding:0 3px}
thead th{font-weight:normal;max-width:64px;overflow-wrap:anywhere;vertical-align:bottom;font-size:10px}
thead th.who,thead th.n{font-weight:bold;font-size:11px} th a{color:inherit} tbody th{text-align:left;font-weight:normal}
td{text-align:center;min-width:24px;cursor:default} td.n{font-weight:bold}
.passed{background:#bfeebf;color:#064} .not-yet{background:#fbd3ad;color:#a40} .not-started{background:#f0f0f0;color:#999}
.could-not-judge{background:#f7e36b;color:#650;font-weight:bold} .unreadable{background:#e2cdf3;color:#50a;font-weight:bold}
tbody th button{font-size:10px;padding:0 2px;margin-left:3px}
tfoot th,tfoot td{background:#f6f6ff;font-weight:bold} .error{color:#a00} .node{color:#a40;font-weight:bold} .legend span{padding:0 4px}
.detail td{text-align:left;max-width:60em}"""


def _watch(xsrf_token: str) -> str:
    """The page's script: ask api/progress every CHANGES_S; when it changed, swap in the page's new content."""
    return (
        "<script>(()=>{const h={'X-XSRFToken':" + json.dumps(xsrf_token) + "};let seen=null;"
        "setInterval(async()=>{try{const r=await fetch('api/progress',{headers:h});if(!r.ok)return;"
        "const t=await r.text();if(seen!==null&&t!==seen){const p=await fetch(location.href,{headers:h});"
        "if(!p.ok)return;const d=new DOMParser().parseFromString(await p.text(),'text/html');"
        "document.getElementById('board').replaceWith(d.getElementById('board'));}seen=t;}catch(e){}}"
        f",{CHANGES_S * 1000});}})();</script>"
    )


@dataclass(frozen=True)
class PageState:
    """What the page shows besides the marks: the room, the queue's state in words, and errors to show."""

    room_id: str
    status: str
    errors: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()  # on a swarm: each node that holds affected participants, in words


def _note(mark: Mark) -> str:
    return " ".join(x for x in (mark.problem, f"Hint: {mark.hint}" if mark.hint else "") if x)


def _css(state: str) -> str:
    return state.replace(" ", "-")


def _again(user: str, xsrf_form: str, words: str) -> str:
    """The teacher's "judge again" for one participant (every saved notebook of theirs, every exercise)."""
    return (
        f"<form method='post' action='api/rejudge'>{xsrf_form}<input type='hidden' name='user' "
        f"value='{html.escape(user)}'><button title='judge every saved notebook of {html.escape(user)} again'>"
        f"{words}</button></form>"
    )


def render_page(
    progress: Progress, state: PageState, xsrf_token: str = "", xsrf_form: str = "", sort: str = "name", user: str = ""
) -> str:
    """The grid: one row per participant, one column per exercise, one mark and colour per cell (its problem
    and hint on hover), sortable by name or by number solved, with a row of how many passed each exercise;
    with ``user``, that participant's detail (every exercise's state, problem and hint)."""
    ids = progress_store.exercise_ids()
    participants = list(progress.participants)
    marks = {u: {e: progress.mark(u, e) for e in ids} for u in participants}
    solved = {u: sum(m.state == progress_store.PASSED for m in marks[u].values()) for u in participants}
    error = "".join(f"<p class='error'>{html.escape(e)}</p>" for e in state.errors if e)
    error += "".join(f"<p class='node'>{html.escape(line)}</p>" for line in state.nodes)
    room = html.escape(state.room_id)
    head = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>labkit room {room}</title>"
        f"<style>{STYLE}</style>{_watch(xsrf_token)}</head><body><div id='board'>"
    )
    if user in marks:
        rows = "".join(
            f"<tr><th>{html.escape(e)}</th><td>{html.escape(REGISTRY[e].title)}</td>"
            f"<td class='{_css(marks[user][e].state)}'>{MARKS[marks[user][e].state]} {label(marks[user][e])}</td>"
            f"<td>{html.escape(_note(marks[user][e]))}</td></tr>"
            for e in ids
        )
        return (
            f"{head}<h1>Room {room}: {html.escape(user)}, {solved[user]} of {len(ids)} solved</h1><p><a href='?'>"
            f"back to the room</a> {_again(user, xsrf_form, 'judge their notebooks again')}</p>{error}"
            "<table class='detail'><tr><th>exercise</th><th>what it asks</th><th>state</th><th>problem and hint</th>"
            f"</tr>{rows}</table></div></body></html>"
        )
    order = sorted(participants, key=lambda u: (-solved[u], u)) if sort == "solved" else sorted(participants)
    columns = "".join(
        f"<th title='{html.escape(e)}: {html.escape(REGISTRY[e].title)}'>{html.escape(e)}</th>" for e in ids
    )
    grid_rows: list[str] = []
    for u in order:
        cells = "".join(
            f"<td class='{_css(m.state)}' title='{html.escape(f'{u} · {e}: {label(m)}. {_note(m)}'.strip())}'>"
            f"{MARKS[m.state]}</td>"
            for e, m in marks[u].items()
        )
        failed = any(m.state == progress_store.COULD_NOT_JUDGE for m in marks[u].values())
        again = _again(u, xsrf_form, "\u21bb") if failed else ""
        grid_rows.append(
            f"<tr><th><a href='?user={html.escape(u)}'>{html.escape(u)}</a>{again}</th>{cells}"
            f"<td class='n'>{solved[u]}</td></tr>"
        )
    passed = [sum(marks[u][e].state == progress_store.PASSED for u in participants) for e in ids]
    summary = "".join(
        f"<td title='{n} of {len(participants)} passed {html.escape(e)}'>{n}</td>" for e, n in zip(ids, passed)
    )
    sorted_by = "<b>{}</b>"
    by_name = sorted_by.format("participant") if sort != "solved" else "<a href='?sort=name'>participant</a>"
    by_solved = sorted_by.format("solved") if sort == "solved" else "<a href='?sort=solved'>solved</a>"
    legend = (
        "<span class='passed'>\u2713 passed</span><span class='not-yet'>\u2717 not yet</span>"
        "<span class='not-started'>\u00b7 not started</span><span class='could-not-judge'>! could not judge "
        "(\u21bb judges again)</span><span class='unreadable'>? notebook unreadable</span> hover a cell for its "
        "problem and hint; click a name for its detail"
    )
    return (
        f"{head}<div class='top'><h1>Room {room}</h1><span>{len(participants)} participants, "
        f"{sum(passed)} passed of {len(participants) * len(ids)}; {html.escape(state.status)}; a new mark shows "
        f"within {CHANGES_S} s</span><form method='post' action='api/refresh'>{xsrf_form}<button>look for saved "
        f"notebooks now</button></form><span class='legend'>{legend}</span></div>{error}"
        f"<table id='grid'><thead><tr><th class='who'>{by_name}</th>{columns}<th class='n'>{by_solved}</th></tr></thead>"
        f"<tbody>{''.join(grid_rows)}</tbody><tfoot><tr><th>passed</th>{summary}<td>{sum(passed)}</td></tr></tfoot>"
        "</table></div></body></html>"
    )
