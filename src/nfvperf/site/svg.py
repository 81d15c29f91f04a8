"""A matplotlib figure as an inline ``<svg>`` element (text kept as text, no XML prolog), so a
page carries its plots with no image files and no script."""
from __future__ import annotations

import io
import re
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

_PROLOG = re.compile(r"^.*?(?=<svg\b)", re.S)


def figure_svg(fig: Any) -> str:
    """The figure as SVG markup starting at ``<svg``; the figure is closed.  Artists given a
    ``gid`` keep it as the ``id`` of their SVG group (the trend plot marks its changes so)."""
    buf = io.StringIO()
    try:
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "nfvperf-site"}):
            fig.savefig(buf, format="svg", bbox_inches="tight")
    finally:
        plt.close(fig)
    return _PROLOG.sub("", buf.getvalue(), count=1)
