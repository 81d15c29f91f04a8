"""The self-contained HTML report (Jinja2 template, PNG plots embedded as base64)."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, Optional

from jinja2 import Environment, FileSystemLoader, select_autoescape

from nfvperf import __version__
from nfvperf.report.plots import all_plots
from nfvperf.report.tables import build

TEMPLATES = Path(__file__).parent / "templates"


def render_html(run: Any, net_of_harness: Optional[bool] = None) -> str:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(["html", "j2"]))
    tpl = env.get_template("report.html.j2")
    return tpl.render(data=build(run, net_of_harness=net_of_harness), plots=all_plots(run, net_of_harness),
                      environment=json.dumps(run.environment or {}, indent=2, sort_keys=True, default=str),
                      config=json.dumps(run.config or {}, indent=2, sort_keys=True, default=str),
                      version=__version__, generated=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"))


def write_html(run: Any, path: Path, net_of_harness: Optional[bool] = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(run, net_of_harness=net_of_harness), encoding="utf-8")
    return path
