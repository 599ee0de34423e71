"""The page visual.py serves or writes (tpuc/data/visual.html): plotly.js
draws the graph and plots; the data is embedded (--static) or fetched from
/data.json (server)."""

from __future__ import annotations

import json
from importlib.resources import files


def plotly_js() -> str:
    """plotly.js as shipped in the plotly package (no network needed)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def page(data: dict | None, manual: bool) -> str:
    """The HTML; with `data` it is self-contained (plotly.js inlined)."""
    if data is not None:
        script = f"<script>{plotly_js()}</script>"
        embedded = json.dumps(data).replace("</", "<\\/")
    else:
        script = '<script src="/plotly.min.js"></script>'
        embedded = "null"
    template = (files("tpuc") / "data" / "visual.html").read_text()
    return (
        template.replace("%MANUAL%", "true" if manual else "false")
        .replace("%DATA%", embedded)
        .replace("%PLOTLY%", script)
    )
