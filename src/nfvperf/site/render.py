"""The site's Jinja2 environment and its two static assets (stylesheet, the index's filter
script), written beside the pages: no CDN, no server, relative links only, so the site works
from ``file://`` and from any web server."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from nfvperf import __version__

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
ASSETS = HERE / "assets"
ASSET_FILES = ("site.css", "site.js")

_env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(["html", "j2"]),
                   undefined=StrictUndefined, trim_blocks=False)


def render_page(template: str, title: str, depth: int, **ctx: Any) -> str:
    """A page of the site; ``depth``: how many directories below the site's root it sits (its
    links to the root are relative: ``../`` per level)."""
    return _env.get_template(template).render(title=title, root="../" * depth, version=__version__, **ctx)


def asset_text(name: str) -> str:
    return (ASSETS / name).read_text(encoding="utf-8")
