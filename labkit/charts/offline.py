"""Rendering with no internet: Altair's offline renderer (its JavaScript bundle cached on disk) and SVG export."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import altair as alt

from labkit.errors import BadInputError

__all__ = ["enable_offline", "to_svg"]


def enable_offline(mode: str = "jupyter") -> str:
    """Make every Altair chart render offline; returns the renderer name now active.

    Args:
        mode: ``"jupyter"`` (interactive, in JupyterLab; active as ``"jupyter+svg"``: every chart's output also
            carries its picture, see :func:`_with_picture`) or ``"svg"`` (static pictures only).
    """
    alt.data_transformers.disable_max_rows()
    if mode == "jupyter":
        alt.renderers.enable("jupyter", offline=True)
        alt.renderers.register(WITH_PICTURE, functools.partial(_with_picture, alt.renderers.get()))
        alt.renderers.enable(WITH_PICTURE)
        with _bundle_cache():  # built now, from the disk cache when there is one, not at the first chart
            alt.JupyterChart.enable_offline(True)
    elif mode in ("svg", "png"):
        alt.renderers.enable(mode)
    else:
        raise BadInputError(f"mode must be 'jupyter' or 'svg' (or 'png'), got {mode!r}")
    return alt.renderers.active


WITH_PICTURE = "jupyter+svg"  #: the renderer enable_offline() makes active for mode="jupyter"


def _with_picture(jupyter: Callable[..., Any], spec: dict, **options: Any) -> dict | tuple[dict, dict]:
    """Altair's offline ``jupyter`` renderer (the interactive JupyterChart widget), plus the same chart drawn as SVG
    in the same output. JupyterLab draws the widget (it ranks widget views first); a saved notebook opened where
    the widget cannot load (a viewer with no widget manager: nbviewer, a code host's preview, nbconvert without
    the widget state) shows the picture instead of the text of a Python object. A chart vl-convert cannot draw
    keeps its widget and says so in its text.
    """
    out = jupyter(spec, **options)  # Altair's own renderer, its options (offline) bound
    bundle, meta = (dict(out[0]), out[1]) if isinstance(out, tuple) else (dict(out), None)
    try:
        bundle["image/svg+xml"] = to_svg(spec)
    except Exception as e:  # the widget still draws; the picture is a fallback
        bundle["text/plain"] = f"{bundle.get('text/plain', 'chart')} (no static picture: {type(e).__name__}: {e})"
    return (bundle, meta) if meta is not None else bundle


def _cache_dir() -> Path:
    from labkit.paths import home, user_cache

    return user_cache() / "cache" if home() is not None else user_cache()  # the folder it always used, unset


@contextlib.contextmanager
def _bundle_cache() -> Iterator[None]:
    """Keep the offline renderer's JavaScript bundle on disk: vl-convert builds it for every new kernel (seconds
    of CPU, the slowest step of a lab's first chart), and it only changes with the altair/vl-convert versions.

    The bundle is keyed by a hash of vl-convert's version, the Vega-Lite version and the source altair asks to
    bundle, so an upgrade builds (and caches) a new one; a cache that cannot be read or written is skipped.
    """
    try:
        import vl_convert as vlc
    except ImportError:  # altair then explains what to install
        yield
        return
    build = vlc.javascript_bundle

    def cached(snippet: str | None = None, vl_version: str | None = None) -> str:
        raw = f"{getattr(vlc, '__version__', '?')}\0{vl_version}\0{snippet}".encode()
        path = _cache_dir() / f"altair-offline-{hashlib.sha256(raw).hexdigest()[:20]}.js"
        try:
            return path.read_text(encoding="utf-8")
        except OSError:
            pass
        bundle = build(snippet, vl_version=vl_version)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(bundle, encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass
        return bundle

    vlc.javascript_bundle = cached
    try:
        yield
    finally:
        vlc.javascript_bundle = build


def to_svg(chart: alt.TopLevelMixin | dict) -> str:
    """Render a chart (or its Vega-Lite spec) to SVG text in Python (vl-convert), with no browser and no network."""
    import vl_convert as vlc

    return vlc.vegalite_to_svg(chart if isinstance(chart, dict) else chart.to_dict())
