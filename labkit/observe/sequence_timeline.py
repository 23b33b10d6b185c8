"""Which sequence each batch slot served, from a labkit.timeline of a stateful model.

    with labkit.timeline(lab, "sequence_accumulate") as tl:
        labkit.run_sequences(lab, "sequence_accumulate", inputs, concurrency=4, length=6)
    labkit.plot_sequence_slots(tl)   # one row per batch slot, each request a box labelled with its sequence
    labkit.observe.sequence_timeline.sequence_slots(tl)        # the same as a table, one row per execution

Triton's sequence batcher (the default, "direct" strategy) gives each live sequence a batch slot of
its own until its last request; the traces say which requests ran together and (through labkit's
request ids, see labkit.client.sequence_ids) which sequence each belongs to, not the slot. The slots here are
assigned the way the batcher does it: a new sequence takes the lowest free slot and keeps it until its
last traced request.
"""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

from .plots import Picture
from .timelines import Execution, Timeline

_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")


def _slots(executions: list[Execution]) -> list[dict[int, str]]:
    """Per execution: slot -> the sequence its request belongs to (requests naming no sequence get
    slots of their own for that execution only)."""
    last_seen: dict[str, int] = {}
    for n, e in enumerate(executions):
        for r in e.requests:
            if r.sequence:
                last_seen[r.sequence] = n
    held: dict[str, int] = {}  # live sequence -> its slot
    out = []
    for n, e in enumerate(executions):
        row: dict[int, str] = {}
        for r in e.requests:
            if r.sequence and r.sequence not in held:
                held[r.sequence] = min(set(range(len(held) + 1)) - set(held.values()))
            if r.sequence:
                row[held[r.sequence]] = r.sequence
        for r in e.requests:
            if not r.sequence:
                row[min(set(range(len(row) + len(held) + 1)) - set(row) - set(held.values()))] = "?"
        out.append(row)
        for seq in [s for s, last in last_seen.items() if last == n and s in held]:
            del held[seq]  # its last request ran: the slot is free for the next sequence
    return out


def sequence_slots(tl: Timeline) -> list[dict[str, Any]]:
    """One row per execution in view: when it started (ms since the first request queued) and the
    sequence each batch slot served ("" for an idle slot, "?" for a request naming no sequence)."""
    shown = tl.shown()
    rows = _slots(shown)
    width = max((max(r) + 1 for r in rows if r), default=0)
    t0 = min((r.queue_start for e in shown for r in e.requests), default=0)
    return [
        {"start_ms": round((e.start - t0) / 1e6, 3), "slots": [row.get(k, "") for k in range(width)]}
        for e, row in zip(shown, rows)
    ]


def plot_sequence_slots(tl: Timeline) -> Picture:
    """One row per batch slot; each execution a column of boxes, one per slot it served, coloured and
    labelled with that slot's sequence id."""
    table = sequence_slots(tl)
    width = max((len(r["slots"]) for r in table), default=1) or 1
    fig = Figure(figsize=(10, 1.2 + 0.45 * width))
    ax = fig.subplots()
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.5 / (1.2 + 0.45 * width), top=1 - 0.4 / (1.2 + 0.45 * width))
    colour_of: dict[str, str] = {}
    for n, row in enumerate(table):
        for k, seq in enumerate(row["slots"]):
            if not seq:
                continue
            colour = "#bbbbbb" if seq == "?" else colour_of.setdefault(seq, _COLOURS[len(colour_of) % len(_COLOURS)])
            ax.broken_barh([(n + 0.05, 0.9)], (k + 0.1, 0.8), facecolors=colour)
            if len(table) <= 40:
                ax.text(n + 0.5, k + 0.5, seq, ha="center", va="center", fontsize="x-small", color="white")
    ax.set_xlim(0, max(len(table), 1))
    ax.set_ylim(width, 0)
    ax.set_yticks([k + 0.5 for k in range(width)], [f"slot {k}" for k in range(width)])
    ax.set_xlabel("execution (in order)")
    ax.set_title(f"{tl.model}: the sequence each batch slot served, {len(table)} executions", fontsize="medium")
    return Picture(fig, f"sequence slots of {tl.model}")
