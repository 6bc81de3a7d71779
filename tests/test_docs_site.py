"""The documentation site works offline: built with ``mkdocs build --strict``, no page or
stylesheet loads anything from another host (fonts are the system's, formulas are typeset by
the KaTeX served with the site)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXTERNAL = re.compile(r"^(https?:)?//", re.I)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("mkdocs")
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                        str(out)], cwd=REPO, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def test_no_page_loads_anything_from_another_host(site):
    loads = re.compile(r"<(script|link|img|iframe|source)\b[^>]*?\b(src|href)=\"([^\"]*)\"",
                       re.I)
    external = []
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 15
    for page in pages:
        for tag, _, url in loads.findall(page.read_text(encoding="utf-8")):
            if EXTERNAL.match(url) and not (tag.lower() == "link" and _is_plain_link(page, url)):
                external.append(f"{page.relative_to(site)}: <{tag} {url}>")
    css_urls = re.compile(r"url\(\s*['\"]?([^)'\"]+)|@import\s+['\"]([^'\"]+)")
    for sheet in sorted(site.rglob("*.css")):
        for url in (a or b for a, b in css_urls.findall(sheet.read_text(encoding="utf-8"))):
            if EXTERNAL.match(url):
                external.append(f"{sheet.relative_to(site)}: url({url})")
    assert not external, external[:10]


def _is_plain_link(page: Path, url: str) -> bool:
    """A ``<link>`` that loads nothing (rel canonical, alternate) is a link, not a load."""
    text = page.read_text(encoding="utf-8")
    tag = re.search(r"<link\b[^>]*href=\"" + re.escape(url) + r"\"[^>]*>", text)
    return bool(tag and re.search(r"rel=\"(canonical|alternate)\"", tag.group(0)))


def test_the_formulas_are_typeset_by_the_katex_served_with_the_site(site):
    page = (site / "api" / "value_ops" / "index.html").read_text(encoding="utf-8")
    assert 'class="arithmatex"' in page  # the V-trace docstrings' formulas
    for asset in ("vendor/katex/katex.min.js", "vendor/katex/contrib/auto-render.min.js",
                  "vendor/katex/katex.min.css", "javascripts/katex.js"):
        assert (site / asset).is_file(), asset
        assert asset.split("/")[-1] in page
    fonts = re.findall(r"url\((fonts/[^)]+\.woff2)\)",
                       (site / "vendor/katex/katex.min.css").read_text())
    assert fonts and all((site / "vendor/katex" / f).is_file() for f in fonts)
