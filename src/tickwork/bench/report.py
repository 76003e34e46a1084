"""The summary a run prints: a table for people, JSON for machines, an SVG plot of lateness.

The SVG is written by hand (no plotting dependency): lateness percentiles over time on a
logarithmic axis, with the spike minutes shaded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape

SKIP = frozenset({"series"})  # in JSON only: for plots, too long for the table
LABELS = {"p50": "p50", "p99": "p99", "max": "max"}


def table(result: dict[str, Any]) -> str:
    """Figures as aligned ``name  value`` lines; lists of rows as tables after them."""
    rows: list[tuple[str, str]] = []
    tables: list[str] = []
    _flatten(result, "", rows, tables)
    width = max((len(name) for name, _ in rows), default=0)
    lines = [f"{name:<{width}}  {value}" for name, value in rows]
    return "\n".join(lines + tables) + "\n"


def _flatten(value: Any, prefix: str, rows: list[tuple[str, str]], tables: list[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in SKIP:
                continue
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), rows, tables)
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        tables.append("\n" + prefix + "\n" + rows_table(value))
    else:
        rows.append((prefix, _fmt(value, prefix)))


def _fmt(value: Any, name: str) -> str:
    if isinstance(value, float) and "seconds" in name and abs(value) < 10:
        return f"{value * 1000:,.1f} ms" if abs(value) < 1 else f"{value:.3f} s"
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return _cell(value).replace("*", "yes") if isinstance(value, bool) else _cell(value)


def rows_table(rows: Sequence[dict[str, Any]]) -> str:
    columns = list(dict.fromkeys(c for r in rows for c in r))
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    head = "  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True))
    body = ["  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join([head, *body])


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "*" if value else ""
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


# -- the SVG plot --------------------------------------------------------------------------

W, H = 900, 360
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 30, 50
FLOOR = 0.001  # 1 ms: the bottom of the log axis
COLOURS = {"p50": "#2b7bba", "p99": "#e08214", "max": "#c0392b"}


def svg_plot(series: Sequence[dict[str, Any]], *, title: str,
             spikes: Sequence[tuple[float, float]] = ()) -> str:
    """``series``: rows with ``t`` (seconds since the start) and ``p50``/``p99``/``max``
    lateness in seconds; ``spikes``: (start, end) spans to shade."""
    points = [r for r in series if r.get("max") is not None]
    t_max = float(max([r["t"] for r in points] + [e for _, e in spikes] + [1.0]))
    top_value = float(max([r["max"] for r in points] + [1.0]))
    decades = max(1, math.ceil(math.log10(top_value / FLOOR)))

    def x(t: float) -> float:
        return LEFT + (W - LEFT - RIGHT) * t / t_max

    def y(v: float) -> float:
        v = max(v, FLOOR)
        return TOP + (H - TOP - BOTTOM) * (1 - math.log10(v / FLOOR) / decades)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="13">{escape(title)}</text>']
    for start, end in spikes:
        out.append(f'<rect x="{x(start):.1f}" y="{TOP}" width="{max(x(end) - x(start), 1):.1f}" '
                   f'height="{H - TOP - BOTTOM}" fill="#f3d9d9"/>')
    for d in range(decades + 1):
        value = FLOOR * 10 ** d
        label = f"{value * 1000:g} ms" if value < 1 else f"{value:g} s"
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y(value):.1f}" y2="{y(value):.1f}" '
                   'stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{label}</text>')
    step = nice_step(t_max)
    t = 0.0
    while t <= t_max + 1e-9:
        out.append(f'<text x="{x(t):.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{t:g}</text>')
        t += step
    out.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 12}" text-anchor="middle">'
               'seconds since the start (scheduled time); shaded: spike minutes</text>')
    out.append(f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{H - BOTTOM}" stroke="#333"/>')
    out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{H - BOTTOM}" y2="{H - BOTTOM}" '
               'stroke="#333"/>')
    for i, (name, colour) in enumerate(COLOURS.items()):
        coords = " ".join(f"{x(r['t']):.1f},{y(r[name]):.1f}" for r in points
                          if r.get(name) is not None)
        if coords:
            out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
                       f'points="{coords}"/>')
        out.append(f'<text x="{LEFT + 10 + 70 * i}" y="{TOP + 14}" fill="{colour}">'
                   f'{LABELS[name]} lateness</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def nice_step(span: float) -> float:
    raw = span / 10
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 5, 10):
        if raw <= m * magnitude:
            return float(m * magnitude)
    return float(10 * magnitude)
