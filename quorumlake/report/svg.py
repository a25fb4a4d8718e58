"""Hand-written SVG charts for the HTML report: no JavaScript, no CDN, nothing to download.

Every chart has a title, labelled axes with units and a legend.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timezone
from html import escape

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"]
WIDTH, HEIGHT = 760, 300
LEFT, RIGHT, TOP, BOTTOM = 70, 170, 36, 46


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = span / max(ticks, 1)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * magnitude:
            return m * magnitude
    return 10 * magnitude


def _time_label(ms: float, span_ms: float) -> str:
    t = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return t.strftime("%m-%d %H:%M") if span_ms > 86_400_000 else t.strftime("%H:%M")


def _fmt(v: float) -> str:
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    if abs(v) >= 1e4:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def line_chart(
    title: str,
    y_label: str,
    series: dict[str, Sequence[tuple[float, float | None]]],
    hlines: Sequence[tuple[float, str]] = (),
    x_label: str = "time (UTC)",
    y_max: float | None = None,
    step: bool = False,
    empty: str = "no data for this chart yet",
) -> str:
    """Lines over time: `series` maps a legend name to (epoch ms, value) points; None values break the line.
    Without any value the chart says `empty`."""
    points = [(x, y) for pts in series.values() for x, y in pts if y is not None]
    if not points:
        return _empty(title, empty)
    xs = [x for x, _ in points]
    ys = [y for _, y in points] + [y for y, _ in hlines]
    x0, x1 = min(xs), max(xs)
    if x1 == x0:
        x1 = x0 + 60_000
    y0 = min(0.0, min(ys))
    y1 = y_max if y_max is not None else max(ys)
    if y1 <= y0:
        y1 = y0 + 1
    y_step = _nice_step(y1 - y0)
    y1 = math.ceil(y1 / y_step) * y_step
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * plot_w

    def sy(y: float) -> float:
        return TOP + plot_h - (y - y0) / (y1 - y0) * plot_h

    out = [_open(title)]
    out.append(_axes(plot_w, plot_h, x_label, y_label))
    y = y0
    while y <= y1 + 1e-9:
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" class="grid"/>'
            f'<text x="{LEFT - 6}" y="{sy(y) + 4:.1f}" class="tick" text-anchor="end">{_fmt(y)}</text>'
        )
        y += y_step
    for i in range(6):
        x = x0 + (x1 - x0) * i / 5
        out.append(
            f'<text x="{sx(x):.1f}" y="{TOP + plot_h + 16}" class="tick" text-anchor="middle">'
            f"{_time_label(x, x1 - x0)}</text>"
        )
    for value, label in hlines:
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{sy(value):.1f}" y2="{sy(value):.1f}" '
            f'class="threshold"/><text x="{LEFT + plot_w - 4}" y="{sy(value) - 4:.1f}" class="tick" '
            f'text-anchor="end">{escape(label)}</text>'
        )
    legend = []
    for i, (name, pts) in enumerate(series.items()):
        colour = PALETTE[i % len(PALETTE)]
        for segment in _segments(sorted(pts, key=lambda p: p[0])):
            coords = []
            for j, (x, yv) in enumerate(segment):
                if step and j:
                    coords.append(f"{sx(x):.1f},{sy(segment[j - 1][1]):.1f}")
                coords.append(f"{sx(x):.1f},{sy(yv):.1f}")
            if len(coords) == 1:
                cx, cy = coords[0].split(",")
                out.append(f'<circle cx="{cx}" cy="{cy}" r="2.5" fill="{colour}"/>')
            else:
                out.append(f'<polyline points="{" ".join(coords)}" fill="none" stroke="{colour}" stroke-width="1.6"/>')
        legend.append((name, colour, "line"))
    if hlines:
        legend.append((hlines[0][1], "#555", "dash"))
    out.append(_legend(legend))
    out.append("</svg>")
    return "".join(out)


def timeline_chart(
    title: str,
    rows: Sequence[tuple[str, float, float, bool, bool]],
    legend: tuple[str, str] = ("AtMinIsr episode", "escalated (under min ISR / offline)"),
    axis_label: str = "cluster topic-partition",
) -> str:
    """Bars from start to end per row label: (label, start ms, end ms, escalated, ongoing); `legend` names the two
    colours (not escalated, escalated)."""
    if not rows:
        return _empty(title)
    labels = sorted({r[0] for r in rows})
    height = TOP + BOTTOM + 18 * len(labels)
    x0 = min(r[1] for r in rows)
    x1 = max(r[2] for r in rows)
    if x1 <= x0:
        x1 = x0 + 60_000
    gutter = 190  # room for the partition labels
    plot_w = WIDTH - LEFT - RIGHT - gutter + 60

    def sx(x: float) -> float:
        return LEFT - 60 + gutter + (x - x0) / (x1 - x0) * plot_w

    out = [_open(title, height)]
    out.append(
        f'<line x1="{sx(x0)}" x2="{sx(x1)}" y1="{height - BOTTOM}" y2="{height - BOTTOM}" '
        f'class="axis"/><text x="{sx((x0 + x1) / 2)}" y="{height - 8}" class="label" '
        f'text-anchor="middle">time (UTC)</text>'
    )
    for i in range(6):
        x = x0 + (x1 - x0) * i / 5
        out.append(
            f'<text x="{sx(x):.1f}" y="{height - BOTTOM + 16}" class="tick" text-anchor="middle">'
            f"{_time_label(x, x1 - x0)}</text>"
        )
    out.append(f'<text x="{sx(x0) - 6}" y="{TOP - 6}" class="label" text-anchor="end">{escape(axis_label)}</text>')
    for i, label in enumerate(labels):
        y = TOP + 18 * i
        out.append(f'<text x="{sx(x0) - 6}" y="{y + 12}" class="tick" text-anchor="end">{escape(label)}</text>')
    for label, start, end, escalated, ongoing in rows:
        y = TOP + 18 * labels.index(label)
        colour = "#d62728" if escalated else "#ff7f0e"
        width = max(sx(end) - sx(start), 3)
        outline = 'stroke="#333" stroke-dasharray="3,2"' if ongoing else ""
        out.append(f'<rect x="{sx(start):.1f}" y="{y + 3}" width="{width:.1f}" height="12" fill="{colour}" {outline}/>')
    out.append(_legend([(legend[0], "#ff7f0e", "box"), (legend[1], "#d62728", "box")], top=TOP))
    out.append("</svg>")
    return "".join(out)


def _segments(points: Sequence[tuple[float, float | None]]) -> list[list[tuple[float, float]]]:
    segments: list[list[tuple[float, float]]] = [[]]
    for x, y in points:
        if y is None:
            if segments[-1]:
                segments.append([])
        else:
            segments[-1].append((x, y))
    return [s for s in segments if s]


def _open(title: str, height: int = HEIGHT) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        f'role="img" aria-label="{escape(title)}"><text x="{WIDTH / 2}" y="20" class="title" '
        f'text-anchor="middle">{escape(title)}</text>'
    )


def _axes(plot_w: float, plot_h: float, x_label: str, y_label: str) -> str:
    mid_y = TOP + plot_h / 2
    return (
        f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + plot_h}" class="axis"/>'
        f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{TOP + plot_h}" y2="{TOP + plot_h}" class="axis"/>'
        f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 8}" class="label" text-anchor="middle">{escape(x_label)}</text>'
        f'<text x="16" y="{mid_y}" class="label" text-anchor="middle" transform="rotate(-90 16 {mid_y})">'
        f"{escape(y_label)}</text>"
    )


def _legend(items: Sequence[tuple[str, str, str]], top: float = TOP) -> str:
    x = WIDTH - RIGHT + 12
    out = [f'<text x="{x}" y="{top}" class="tick" font-weight="bold">legend</text>']
    for i, (name, colour, kind) in enumerate(items):
        y = top + 16 * (i + 1)
        if kind == "box":
            mark = f'<rect x="{x}" y="{y - 8}" width="14" height="9" fill="{colour}"/>'
        elif kind == "dash":
            mark = f'<line x1="{x}" x2="{x + 14}" y1="{y - 4}" y2="{y - 4}" class="threshold"/>'
        else:
            mark = f'<line x1="{x}" x2="{x + 14}" y1="{y - 4}" y2="{y - 4}" stroke="{colour}" stroke-width="2.5"/>'
        short = name if len(name) <= 24 else name[:23] + "…"
        out.append(f'{mark}<text x="{x + 19}" y="{y}" class="tick">{escape(short)}</text>')
    return "".join(out)


def _empty(title: str, text: str = "no data for this chart yet") -> str:
    return (
        f'{_open(title, 80)}<text x="{WIDTH / 2}" y="54" class="tick" text-anchor="middle">{escape(text)}</text></svg>'
    )


# One colour per anomaly kind in the incident timeline (gold.incident_events.kind).
KIND_COLOURS = {
    "broker_down": "#d62728",
    "controller_down": "#8c564b",
    "broker_fenced": "#e377c2",
    "leader_election": "#9467bd",
    "voter_lagging": "#ff7f0e",
    "hw_stalled": "#7f7f7f",
    "metadata_divergence": "#17becf",
    "partitions_offline": "#000000",
    "partitions_under_min_isr": "#bcbd22",
    "partitions_at_min_isr": "#2ca02c",
}


def incident_timeline(
    title: str,
    incidents: Sequence[tuple[float, float, str, str]],
    episodes: Sequence[tuple[str, str, float, float, bool]],
) -> str:
    """One cluster's incidents over time: a lane per node (and one for the cluster as a whole, one for its partitions),
    each incident a shaded band labelled with its id (`incidents`: start ms, end ms, severity, label), each anomaly a
    bar on its lane coloured by kind (`episodes`: lane, kind, start ms, end ms, ongoing); a single event (an
    election) is a diamond."""
    if not incidents:
        return _empty(title)

    def lane_order(lane: str) -> tuple[int, int, str]:
        if lane.startswith("node "):
            return (1, int(lane.split()[1]), lane)
        return (0 if lane == "cluster" else 2, 0, lane)

    lanes = sorted({e[0] for e in episodes} | {"cluster"}, key=lane_order)
    lane_h = 20
    height = TOP + 24 + BOTTOM + lane_h * len(lanes)
    x0 = min(i[0] for i in incidents)
    x1 = max(max(i[1] for i in incidents), max((e[3] for e in episodes), default=x0))
    if x1 <= x0:
        x1 = x0 + 60_000
    pad = (x1 - x0) * 0.03
    x0, x1 = x0 - pad, x1 + pad
    gutter = 80
    plot_w = WIDTH - RIGHT - gutter - 10
    top = TOP + 24

    def sx(x: float) -> float:
        return gutter + (x - x0) / (x1 - x0) * plot_w

    out = [_open(title, height)]
    bottom = top + lane_h * len(lanes)
    for start, end, severity, label in incidents:
        colour = "#f8d0d0" if severity == "critical" else "#fff1cc"
        width = max(sx(end) - sx(start), 2)
        out.append(
            f'<rect x="{sx(start):.1f}" y="{top - 4}" width="{width:.1f}" height="{bottom - top + 4}" '
            f'fill="{colour}" stroke="#bbb"><title>{escape(label)}</title></rect>'
            f'<text x="{sx(start):.1f}" y="{top - 8}" class="tick">{escape(label[:40])}</text>'
        )
    for i, lane in enumerate(lanes):
        y = top + lane_h * i
        out.append(
            f'<line x1="{gutter}" x2="{gutter + plot_w}" y1="{y + lane_h / 2}" y2="{y + lane_h / 2}" class="grid"/>'
            f'<text x="{gutter - 6}" y="{y + 14}" class="tick" text-anchor="end">{escape(lane)}</text>'
        )
    for lane, kind, start, end, ongoing in episodes:
        y = top + lane_h * lanes.index(lane)
        colour = KIND_COLOURS.get(kind, "#1f77b4")
        tip = f"<title>{escape(kind)} {escape(lane)}</title>"
        if end <= start:
            cx, cy = sx(start), y + lane_h / 2
            out.append(
                f'<polygon points="{cx:.1f},{cy - 6:.1f} {cx + 6:.1f},{cy:.1f} {cx:.1f},{cy + 6:.1f} '
                f'{cx - 6:.1f},{cy:.1f}" fill="{colour}">{tip}</polygon>'
            )
            continue
        outline = 'stroke="#333" stroke-dasharray="3,2"' if ongoing else ""
        width = max(sx(end) - sx(start), 3)
        out.append(
            f'<rect x="{sx(start):.1f}" y="{y + 4}" width="{width:.1f}" height="{lane_h - 8}" fill="{colour}" '
            f'opacity="0.85" {outline}>{tip}</rect>'
        )
    out.append(
        f'<line x1="{gutter}" x2="{gutter + plot_w}" y1="{bottom}" y2="{bottom}" class="axis"/>'
        f'<text x="{gutter + plot_w / 2}" y="{height - 8}" class="label" text-anchor="middle">time (UTC)</text>'
    )
    for i in range(6):
        x = x0 + (x1 - x0) * i / 5
        out.append(
            f'<text x="{sx(x):.1f}" y="{bottom + 16}" class="tick" text-anchor="middle">'
            f"{_time_label(x, x1 - x0)}</text>"
        )
    kinds = [k for k in KIND_COLOURS if any(e[1] == k for e in episodes)]
    out.append(_legend([(k.replace("_", " "), KIND_COLOURS[k], "box") for k in kinds], top=TOP))
    out.append("</svg>")
    return "".join(out)
