"""The documentation site works offline and from disk: built with ``mkdocs build --strict``,
no page or stylesheet loads anything from another host (fonts are the system's, formulas are
typeset by the KaTeX served with the site), and in headless Chromium, with every network
request refused, each navigation link of a ``file://`` page opens its page (not a directory
listing) and API signatures wrap inside their boxes."""

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
    page = (site / "api" / "value_ops.html").read_text(encoding="utf-8")
    assert 'class="arithmatex"' in page  # the V-trace docstrings' formulas
    for asset in ("vendor/katex/katex.min.js", "vendor/katex/contrib/auto-render.min.js",
                  "vendor/katex/katex.min.css", "javascripts/katex.js"):
        assert (site / asset).is_file(), asset
        assert asset.split("/")[-1] in page
    fonts = re.findall(r"url\((fonts/[^)]+\.woff2)\)",
                       (site / "vendor/katex/katex.min.css").read_text())
    assert fonts and all((site / "vendor/katex" / f).is_file() for f in fonts)


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (Debian's ``chromium``) driven by Playwright."""
    import shutil
    sync_api = pytest.importorskip("playwright.sync_api")
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.skip("no chromium on this machine (apt-get install chromium; .ci/run does)")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, headless=True,
                                     args=["--no-sandbox"])
        yield chromium
        chromium.close()


def _offline_page(browser, refused):
    page = browser.new_page()
    page.route(re.compile(r"^(https?|wss?)://"),
               lambda route: (refused.append(route.request.url), route.abort()))
    return page


def test_every_navigation_link_opens_its_page_from_disk(site, browser):
    refused: list = []
    page = _offline_page(browser, refused)
    page.goto((site / "index.html").as_uri())
    links = page.eval_on_selector_all(
        "nav.md-nav--primary a.md-nav__link[href]", "els => els.map(e => e.href)")
    targets = sorted({u.split("#")[0] for u in links if u.startswith("file://")})
    assert len(targets) > 25, targets
    for url in targets:
        page.goto(url)
        assert page.url.endswith(".html"), url
        # a page of the site, not Chromium's "Index of" listing of a directory
        assert page.locator("article.md-content__inner").count() == 1, url
        assert not page.title().startswith("Index of"), url
    # and by clicking, as a reader does: the home page's link to the results
    page.goto((site / "index.html").as_uri())
    page.click("nav.md-nav--primary a.md-nav__link[href$='results.html']")
    assert page.url.endswith("/results.html")
    assert page.locator("h1").first.inner_text().startswith("Results")
    assert not refused, refused[:5]


def test_api_signatures_wrap_inside_their_boxes(site, browser):
    refused: list = []
    page = _offline_page(browser, refused)
    # a phone's width: even a signature formatted to 60 columns is wider than its box
    page.set_viewport_size({"width": 420, "height": 800})
    page.goto((site / "api" / "replay.html").as_uri())
    boxes = page.eval_on_selector_all(
        ".doc-signature code",
        "els => els.map(e => [e.scrollWidth, e.clientWidth, e.innerText.length,"
        " e.getClientRects().length, e.offsetHeight])")
    assert len(boxes) > 10
    longest = max(boxes, key=lambda b: b[2])
    assert longest[2] > 300  # make_offline_replay_buffer's signature
    # it runs over several lines, and no line runs past its box
    assert all(scroll <= client + 1 for scroll, client, *_ in boxes), boxes
    line_height = min(b[4] for b in boxes)
    assert longest[4] > 4 * line_height
    assert not refused, refused[:5]


def test_search_works_from_disk(site, browser):
    """Material's search runs in a Web Worker, which no browser starts from a file:// page:
    the offline plugin's iframe shim (served with the site) runs it; it used to stay at
    "Initializing search"."""
    refused: list = []
    page = _offline_page(browser, refused)
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto((site / "index.html").as_uri())
    page.wait_for_timeout(500)
    page.keyboard.press("/")  # Material's shortcut to the search box
    page.keyboard.type("V-trace")
    page.wait_for_function("() => document.querySelectorAll("
                           "'li.md-search-result__item').length > 0", timeout=20000)
    meta = page.inner_text(".md-search-result__meta")
    assert re.match(r"\d+ matching documents", meta.strip()), meta
    page.click("li.md-search-result__item a")
    assert page.url.startswith("file://") and ".html" in page.url
    assert not refused, refused[:5]


@pytest.mark.parametrize("name", ["api/replay.html", "api/utils.html", "results/offline.html"])
def test_the_sidebars_title_covers_no_navigation_entry(site, browser, name):
    """A page far down the navigation scrolls the sidebar to its entry; the sticky title
    above the entries covered the one beneath it."""
    refused: list = []
    page = _offline_page(browser, refused)
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto((site / name).as_uri())
    page.wait_for_timeout(500)
    covered = page.evaluate("""() => {
      const title = document.querySelector(
        '.md-sidebar--primary .md-nav--primary > .md-nav__title');
      const box = title.getBoundingClientRect();
      return [...document.querySelectorAll('.md-sidebar--primary .md-nav__link')]
        .filter(link => !title.contains(link) && link.offsetParent !== null)
        .map(link => [link.innerText.trim(), link.getBoundingClientRect()])
        .filter(([, r]) => r.bottom > box.top + 1 && r.top < box.bottom - 1 && r.height > 0)
        .map(([text]) => text);
    }""")
    assert page.evaluate("() => document.querySelector('.md-sidebar--primary "
                         ".md-sidebar__scrollwrap').scrollTop") > 0  # scrolled to the entry
    assert covered == [], covered
    assert not refused, refused[:5]


def test_configuration_opens_with_a_summary_and_lists_every_configurable_apart(site):
    page = (site / "configuration.html").read_text(encoding="utf-8")
    tables = re.findall(r"<table>.*?</table>", page, re.S)
    assert tables and "TrainerConfig.algorithm_ctor" in tables[0]
    # defaults and meanings as the code has them
    assert re.search(r"TrainerConfig\.unroll_length</code></a></td>\s*<td><code>8</code></td>"
                     r"\s*<td>steps per environment per iteration", tables[0]), tables[0][:2000]
    text = re.sub(r"<[^>]+>", " ", page)
    assert len(text.split()) < 1500  # a page, not the 35 screens it was
    full = (site / "configurables.html").read_text(encoding="utf-8")
    for name in ("TrainerConfig", "ImpalaAlgorithm", "ReplayBuffer", "torch.optim.Adam"):
        assert f"<code>{name}</code>" in full, name
    assert 'href="configurables.html#trainerconfig"' in page
    assert 'id="trainerconfig"' in full


def test_the_home_page_opens_in_a_users_words():
    """What rlf does for its reader, before any of its internal names."""
    text = (REPO / "docs" / "index.md").read_text()
    first = text.split("\n\n")[1]
    assert first.startswith("rlf trains reinforcement-learning agents")
    for internal in ("TimeStep", "AlgStep", "unroller", "namedtuple", "Experience"):
        assert internal not in first, internal
