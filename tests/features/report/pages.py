"""What a report page shows, read the same way from its HTML (``page_facts``) and from a real
browser that opened it (``browser_facts``): the files its links point to and, for each figure,
the points of each line that carries an id (``features/report/run_curves.py``); and the checks
the run and sweep pages' tests make of them."""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

from tests.features.report.browser import Browser
from training.curves import CURVES_FILE, read_curves

# The words of a sweep's page that say nothing about one run.
SWEEP_WORDS = (
    "One row per configuration",
    "Welch",
    "Holm",
    "mean over seeds",
    "band",
    "swept",
    "all runs",
    "n=1",
)
# A curve figure's caption -> its line's id and the curves.jsonl key it draws.
CURVE_LINES = {
    "training loss": [("train-loss", "train/loss"), ("val-loss", "val/loss")],
    "learning rate": [("lr-1", "lr-")],
    "tokens per second": [("tokens-per-sec", "train/tokens_per_sec")],
    "gradient norm": [("grad-norm", "train/grad_norm")],
}
_SVG = "{http://www.w3.org/2000/svg}"

# The page's links as files, and per figure: its caption, its curve set (null outside one),
# whether the image loaded, and the points of each line with an id (M and L commands).
_FACTS_JS = r"""(function () {
  function lines(img) {
    var text = atob(img.src.split(",")[1]);
    var bytes = Uint8Array.from(text, function (c) { return c.charCodeAt(0); });
    var svg = new DOMParser().parseFromString(new TextDecoder().decode(bytes), "image/svg+xml");
    var found = {};
    svg.querySelectorAll("g[id]").forEach(function (g) {
      var path = g.querySelector("path");
      if (path) found[g.id] = (path.getAttribute("d").match(/[ML]/g) || []).length;
    });
    return found;
  }
  return {
    links: Array.from(document.querySelectorAll("a[href]"), function (a) { return a.href; }),
    figures: Array.from(document.querySelectorAll("figure img"), function (img) {
      var set = img.closest("div.curve-set");
      return {title: img.alt, set: set ? set.dataset.key : null,
              shown: img.complete && img.naturalWidth > 0, lines: lines(img)};
    }),
    text: document.body.innerText,
  };
})()"""


class _Links(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__()
        self.links: list[str] = []
        self.figures: list[dict] = []
        self._set: list[str | None] = [None]
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attrs = dict(attrs)
        if tag == "a" and "href" in attrs:
            self.links.append(attrs["href"])
        elif tag == "div":
            self._set.append(
                attrs.get("data-key") if "curve-set" in attrs.get("class", "") else None
            )
        elif tag == "img" and attrs.get("src", "").startswith("data:image/svg+xml;base64,"):
            svg = ET.fromstring(base64.b64decode(attrs["src"].split(",", 1)[1]))
            lines = {}
            for group in svg.iter(f"{_SVG}g"):
                path = group.find(f"{_SVG}path")
                if group.get("id") and path is not None:
                    lines[group.get("id")] = len(re.findall("[ML]", path.get("d", "")))
            self.figures.append({"title": attrs["alt"], "set": self._set[-1], "lines": lines})

    def handle_endtag(self, tag: str) -> None:
        if tag == "div":
            self._set.pop()


def page_facts(page: Path) -> dict:
    """``browser_facts`` read from the HTML alone: links resolved against the page's folder."""
    parsed = _Links(page.read_text())
    links = [str(page.parent / unquote(href)) for href in parsed.links]
    return {"links": links, "figures": [{**f, "shown": True} for f in parsed.figures]}


def browser_facts(browser: Browser, page: Path) -> dict:
    """What ``browser`` shows of ``page``: its links as paths, its figures, its text."""
    browser.open(page)
    facts = browser.evaluate(_FACTS_JS)
    facts["links"] = [unquote(urlparse(link).path) for link in facts["links"]]
    return facts


def dead_links(facts: dict) -> list[str]:
    """The links of a page that point to no file or folder."""
    assert facts["links"], "a page links its run's files"
    return [link for link in facts["links"] if not Path(link).exists()]


def missing_points(facts: dict, run_dirs: dict[str | None, list[Path]]) -> list[str]:
    """Each curve figure whose line has fewer points than the steps at which each of its
    runs (``run_dirs``: by curve set) logged what it draws; and each set without a figure."""
    wrong = []
    for key, dirs in run_dirs.items():
        figures = [f for f in facts["figures"] if f["set"] == key]
        drawn = {f["title"]: [n for n in CURVE_LINES if n in f["title"]] for f in figures}
        wrong += [f"set {key}: {title} draws no known curve" for title, n in drawn.items() if not n]
        titles = {name for names in drawn.values() for name in names}
        wrong += [f"set {key}: no figure of {name}" for name in set(CURVE_LINES) - titles]
        logged = [read_curves(d / CURVES_FILE) for d in dirs]
        for figure in figures:
            if not figure["shown"]:
                wrong.append(f"set {key}: {figure['title']} is not shown")
            for gid, prefix in (line for n in drawn[figure["title"]] for line in CURVE_LINES[n]):
                steps = min(
                    len({ln["step"] for ln in lines if any(k.startswith(prefix) for k in ln)})
                    for lines in logged
                )
                points = figure["lines"].get(gid, 0)
                if steps == 0 or points < steps:
                    wrong.append(f"set {key}: {gid} has {points} points, {steps} logged steps")
    return wrong
