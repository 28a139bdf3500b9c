"""Make an executed notebook static: widgets become what a reader can see without a kernel or JavaScript.

An executed notebook keeps its widgets as *views* of models whose state sits in the notebook's metadata;
exported as is, the HTML would need the widget manager — fetched from a CDN — to draw anything. Here:

* an Altair ``JupyterChart`` becomes its chart drawn as SVG (vl-convert, in Python, no browser, no network): the
  picture its output already carries (drawn beside the widget when it ran, :func:`labkit.charts.enable_offline`),
  else drawn now from the spec in the widget state;
* a tqdm progress bar (an HBox of text, a progress bar, text) is dropped: it only showed time passing;
* any other widget (a panel, controls) becomes a short note with its text, followed by the charts it holds.

:func:`external_resources` lists what an HTML page would fetch on opening — the last check before a report
is written, so a report that would reach the network is never produced.
"""

from __future__ import annotations

import copy
import re
from html import escape
from html.parser import HTMLParser
from typing import Any

__all__ = ["make_static", "external_resources", "chart_svg", "WIDGET_VIEW", "WIDGET_STATE"]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
_JUPYTER_CHART = "altair.jupyter.jupyter_chart.JupyterChart"
_PROGRESS = {"FloatProgressModel", "IntProgressModel"}
_REF = re.compile(r"IPY_MODEL_(\w+)")


def chart_svg(spec: dict[str, Any]) -> str:
    """A Vega-Lite spec drawn as SVG text (vl-convert, offline): :func:`labkit.charts.to_svg`."""
    from labkit.charts.offline import to_svg

    return to_svg(spec)


def _refs(value: Any) -> list[str]:
    if isinstance(value, str):
        return _REF.findall(value)
    if isinstance(value, list | tuple):
        return [r for v in value for r in _refs(v)]
    if isinstance(value, dict):
        return [r for v in value.values() for r in _refs(v)]
    return []


class _Widgets:
    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    def model(self, model_id: str) -> dict[str, Any] | None:
        return self.state.get(model_id)

    def name(self, model_id: str) -> str:
        m = self.model(model_id) or {}
        return m.get("state", {}).get("_anywidget_id") or m.get("model_name", "?")

    def walk(self, model_id: str, seen: set[str] | None = None) -> list[str]:
        """The model and every model it holds (children, an Output widget's outputs), depth first."""
        seen = set() if seen is None else seen
        if model_id in seen or self.model(model_id) is None:
            return []
        seen.add(model_id)
        state = self.model(model_id)["state"]  # type: ignore[index]
        held = _refs(state.get("children", [])) + [
            o.get("data", {}).get(WIDGET_VIEW, {}).get("model_id", "") for o in state.get("outputs", []) or []]
        return [model_id] + [m for h in held if h for m in self.walk(h, seen)]

    def is_progress_bar(self, model_id: str) -> bool:
        m = self.model(model_id) or {}
        kids = _refs(m.get("state", {}).get("children", []))
        names = {self.name(k) for k in kids}
        return m.get("model_name") == "HBoxModel" and bool(names & _PROGRESS) and names <= _PROGRESS | {"HTMLModel",
                                                                                                        "LabelModel"}

    def text(self, model_ids: list[str]) -> str:
        parts = []
        for mid in model_ids:
            s = self.model(mid)["state"]  # type: ignore[index]
            if self.name(mid) in ("HTMLModel", "LabelModel", "HTMLMathModel") and s.get("value"):
                parts.append(re.sub(r"<[^>]+>", " ", str(s["value"])))
            elif s.get("description"):
                parts.append(str(s["description"]))
        return re.sub(r"\s+", " ", " · ".join(p.strip() for p in parts if p.strip()))


def _picture(out: dict[str, Any]) -> str | None:
    """An output's SVG, as HTML inlines it (from ``<svg``: no XML prolog or DOCTYPE), or None. A file keeps a
    multi-line string as a list of lines."""
    svg = out.get("data", {}).get("image/svg+xml")
    svg = "".join(svg) if isinstance(svg, list) else svg
    return svg[svg.index("<svg"):] if isinstance(svg, str) and "<svg" in svg else None


def _svg_output(spec: dict[str, Any]) -> dict[str, Any]:
    return {"output_type": "display_data", "metadata": {}, "data": {"image/svg+xml": chart_svg(spec)}}


def _note(text: str) -> dict[str, Any]:
    html = (f"<div class='labkit-widget-note'><b>Interactive widget</b> (open the notebook in JupyterLab to use it)"
            f"{': ' + escape(text[:300]) if text else ''}</div>")
    return {"output_type": "display_data", "metadata": {}, "data": {"text/html": html, "text/plain": text}}


def make_static(nb: Any) -> tuple[Any, dict[str, int]]:
    """A copy of the executed notebook ``nb`` with every widget view replaced (see the module docstring).

    Returns:
        the static notebook (its widget state removed) and counts: ``charts`` drawn, ``progress_bars``
        dropped, ``widgets`` noted, ``missing`` (views whose state was not saved, shown as their text).
    """
    # the widget state can weigh megabytes (each chart carries its JavaScript): take it out, copy the rest
    meta = dict(nb.metadata)
    state = meta.pop("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    nb = copy.deepcopy(type(nb)({**nb, "metadata": {}}))
    nb.metadata.update(copy.deepcopy(meta))
    widgets = _Widgets(state)
    counts = {"charts": 0, "progress_bars": 0, "widgets": 0, "missing": 0}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        outputs = []
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get(WIDGET_VIEW)
            picture = _picture(out)
            if view is None:
                if picture is not None:
                    out["data"]["image/svg+xml"] = picture
                outputs.append(out)
                continue
            mid = view.get("model_id", "")
            if picture is not None:  # drawn beside its widget when it ran: kept
                counts["charts"] += 1
                outputs.append({"output_type": "display_data", "metadata": {}, "data": {"image/svg+xml": picture}})
                continue
            if widgets.model(mid) is None:
                counts["missing"] += 1
                outputs.append(_note(str(out.get("data", {}).get("text/plain", ""))))
            elif widgets.name(mid) == _JUPYTER_CHART:
                counts["charts"] += 1
                outputs.append(_svg_output(widgets.model(mid)["state"]["spec"]))  # type: ignore[index]
            elif widgets.is_progress_bar(mid):
                counts["progress_bars"] += 1
            else:
                held = widgets.walk(mid)
                counts["widgets"] += 1
                outputs.append(_note(widgets.text(held)))
                for m in held:
                    if widgets.name(m) == _JUPYTER_CHART and widgets.model(m)["state"].get("spec"):  # type: ignore[index]
                        counts["charts"] += 1
                        outputs.append(_svg_output(widgets.model(m)["state"]["spec"]))  # type: ignore[index]
        cell["outputs"] = outputs
    return nb, counts


# -- the last check: nothing in the page may fetch anything ------------------------------------------------------

_FETCHING = {  # tag -> attributes a browser loads on its own when the page opens
    "img": ("src", "srcset"), "script": ("src",), "iframe": ("src",), "frame": ("src",), "embed": ("src",),
    "source": ("src", "srcset"), "video": ("src", "poster"), "audio": ("src",), "track": ("src",),
    "input": ("src",), "object": ("data",), "image": ("href", "xlink:href"), "use": ("href", "xlink:href"),
    "feimage": ("href", "xlink:href"),
}
_CSS_URL = re.compile(r"""url\(\s*['"]?([^'")\s]+)|@import\s+['"]([^'"]+)""", re.I)
_LOCAL = ("data:", "#", "about:", "blob:")
_NOT_FETCHED = {"alternate", "author", "bookmark", "canonical", "help", "license", "next", "prev", "search"}


class _Finder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._in_style = False

    def _css(self, text: str) -> None:
        for m in _CSS_URL.finditer(text):
            self._check(m.group(1) or m.group(2))

    def _check(self, url: str | None) -> None:
        url = (url or "").strip()
        if url and not url.lower().startswith(_LOCAL):
            self.found.append(url)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        tag = tag.lower()
        values = dict(attrs)
        for attr in _FETCHING.get(tag, ()):
            for part in (values.get(attr) or "").split(",") if "srcset" in attr else [values.get(attr)]:
                self._check((part or "").strip().split(" ")[0])
        rels = set((values.get("rel") or "").lower().split())
        if tag == "link" and not rels <= _NOT_FETCHED:  # stylesheet, icon, preload…: loaded on opening
            self._check(values.get("href"))
        if values.get("style"):
            self._css(values["style"] or "")
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        if tag.lower() == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self._css(data)


def external_resources(html: str) -> list[str]:
    """Every address an HTML page would load by itself when opened (scripts, images, styles, frames, CSS
    ``url()``/``@import``) that is not inside the page (``data:``, ``#fragment``). Links a reader clicks are
    not counted."""
    finder = _Finder()
    finder.feed(html)
    finder.close()
    return finder.found
