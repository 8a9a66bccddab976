"""Inline SVG: the queues' sparklines and a job's timeline (from timeline.Layout)."""

from __future__ import annotations

from collections.abc import Sequence

from pinledger.dashboard.render import duration, esc, when
from pinledger.dashboard.timeline import ROW_HEIGHT, Layout


def sparkline(values: Sequence[int], width: int = 160, height: int = 28, label: str = "") -> str:
    """A polyline of `values` (oldest first), scaled to the largest."""
    if not values:
        values = [0]
    top = max(*values, 1)
    step = width / max(len(values) - 1, 1)
    points = " ".join(
        f"{i * step:.1f},{height - 2 - v * (height - 4) / top:.1f}" for i, v in enumerate(values)
    )
    return (
        f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{esc(label)}"><polyline points="{points}" /></svg>'
    )


def timeline(layout: Layout) -> str:
    parts = [
        f'<svg class="timeline" viewBox="0 0 {layout.width} {layout.height}" '
        f'width="100%" role="img" aria-label="the job\'s attempts on a time axis">'
    ]
    for tick in layout.ticks:
        parts.append(
            f'<line class="tick" x1="{tick.x:.1f}" x2="{tick.x:.1f}" y1="18" '
            f'y2="{layout.height}" /><text class="tick" x="{tick.x:.1f}" y="12">'
            f"{esc(when(tick.at)[11:])}</text>"
        )
    for bar in layout.bars:
        parts.append(
            f'<g class="bar" data-attempt="{bar.attempt}" data-outcome="{esc(bar.outcome)}">'
            f'<text class="label" x="4" y="{bar.y + ROW_HEIGHT / 2 + 4:.1f}">'
            f"attempt {bar.attempt}</text>"
        )
        for seg in bar.segments:
            parts.append(
                f'<rect class="seg {seg.kind}" x="{seg.x:.1f}" y="{bar.y + 8:.1f}" '
                f'width="{seg.width:.1f}" height="{ROW_HEIGHT - 16}"><title>{esc(seg.kind)} '
                f"{esc(duration(seg.end - seg.start))}</title></rect>"
            )
        parts.append("</g>")
    for mark in layout.marks:
        step = mark.step
        css = "mark rejected" if mark.rejected else "mark"
        verdict = f"rejected: {step.reason}" if mark.rejected else "applied"
        title = (
            f"{when(step.at)} {step.action} by {step.source} claim {step.claim or '-'}: {verdict}"
        )
        shape = (
            f'<path d="M{mark.x - 6:.1f},{mark.y - 6:.1f} l12,12 m0,-12 l-12,12" />'
            if mark.rejected
            else f'<circle cx="{mark.x:.1f}" cy="{mark.y:.1f}" r="5" />'
        )
        parts.append(
            f'<g class="{css}" data-action="{esc(step.action)}" data-offset="{step.offset}">'
            f"{shape}<title>{esc(title)}</title></g>"
        )
    parts.append("</svg>")
    return "".join(parts)
