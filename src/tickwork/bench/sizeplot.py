"""The SVG of the tables' size over a run (``tickwork bench w2 --size-plot``): bytes on disk
above, rows below, one line per table, and a dashed line at each retention passed.

Written by hand like the lateness plot (tickwork.bench.report): no plotting dependency.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape

from tickwork.bench.report import nice_step
from tickwork.bench.tables import MIB, TABLES

W, PANEL = 900, 250
LEFT, RIGHT, TOP, GAP, BOTTOM = 80, 20, 30, 40, 50
COLOURS = {"jobs": "#2b7bba", "occurrences": "#e08214", "attempts": "#c0392b",
           "database": "#7f7f7f"}


def size_plot(series: Sequence[dict[str, Any]], *, title: str,
              retention: float | None) -> str:
    """``series``: samples with ``t`` (seconds since sampling started), ``rows`` and
    ``bytes`` by table (bytes may be None per table: then the database's line is drawn)."""
    t_max = float(max([s["t"] for s in series] + [1.0]))
    height = TOP + 2 * PANEL + GAP + BOTTOM
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" '
           f'viewBox="0 0 {W} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{height}" fill="white"/>',
           f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="13">{escape(title)}</text>']

    def x(t: float) -> float:
        return LEFT + (W - LEFT - RIGHT) * t / t_max

    per_table = all(s["bytes"].get(t) is not None for s in series for t in TABLES)
    sized = TABLES if per_table else ("database",)
    panels = ((TOP, "bytes", sized, MIB, "MiB on disk"), (TOP + PANEL + GAP, "rows", TABLES, 1,
                                                          "rows"))
    for top, measure, names, unit, label in panels:
        values = [s[measure].get(n) or 0 for s in series for n in names]
        v_max = max([*values, 1]) / unit * 1.05
        bottom = top + PANEL

        def y(v: float, top: int = top, v_max: float = v_max) -> float:
            return top + PANEL * (1 - v / v_max)

        step = nice_step(v_max)
        v = 0.0
        while v <= v_max + 1e-9:
            out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                       'stroke="#ddd"/>')
            out.append(f'<text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:,g}</text>')
            v += step
        out.append(f'<text x="14" y="{top + PANEL / 2:.0f}" text-anchor="middle" '
                   f'transform="rotate(-90 14 {top + PANEL / 2:.0f})">{label}</text>')
        out.append(f'<line x1="{LEFT}" x2="{LEFT}" y1="{top}" y2="{bottom}" stroke="#333"/>')
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{bottom}" y2="{bottom}" '
                   'stroke="#333"/>')
        for k in range(1, int(t_max // retention) + 1 if retention else 1):
            assert retention is not None
            at = x(k * retention)
            out.append(f'<line x1="{at:.1f}" x2="{at:.1f}" y1="{top}" y2="{bottom}" '
                       'stroke="#555" stroke-dasharray="4 4"/>')
            near_edge = at > W - RIGHT - 80  # the label goes to the line's left
            anchor = f'x="{at - 3:.1f}" text-anchor="end"' if near_edge else f'x="{at + 3:.1f}"'
            out.append(f'<text {anchor} y="{top + 12}">retention x{k}</text>')
        for i, name in enumerate(names):
            coords = " ".join(f"{x(s['t']):.1f},{y((s[measure].get(name) or 0) / unit):.1f}"
                              for s in series)
            if coords:
                out.append(f'<polyline fill="none" stroke="{COLOURS[name]}" stroke-width="1.5" '
                           f'points="{coords}"/>')
            out.append(f'<text x="{W - RIGHT - 330 + 110 * i}" y="{top - 4}" '
                       f'fill="{COLOURS[name]}">{name}</text>')
    step = nice_step(t_max)
    t = 0.0
    base = TOP + 2 * PANEL + GAP
    while t <= t_max + 1e-9:
        out.append(f'<text x="{x(t):.1f}" y="{base + 16}" text-anchor="middle">{t:g}</text>')
        t += step
    out.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{height - 12}" text-anchor="middle">'
               'seconds since the load started; dashed: each retention passed</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
