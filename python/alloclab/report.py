"""The HTML report of a results root: every study's latest run on one page, readable offline in any browser.

``alloclab reproduce`` writes ``index.html`` into its results root after the studies ran; ``alloclab report DIR``
rebuilds it from what ``DIR`` holds. One section per study (its newest ``DIR/<study>/<stamp>/``): title, seed, quick
or full, when, how long, on which host and commit; the seed's claim as published | virtual | real (the
``projected_<name>.parquet`` tables) with its figure; the study's table as the CLI prints it (ours beside the published
figures, with the verdict and significance columns, "n.s." where a difference is not a finding); the seed's own
table; the notes; and the plots, embedded as ``data:`` URIs so that the page is one self-contained file (mail it,
open it from a USB stick). A few lines of script mark on ``<body>`` how many images decoded
(``data-images="decoded/total"``), which the browser test reads; the page needs no script to be read.

Leaves out: older runs of a study (each study's newest stamp only), the per-run data tables (``data``, ``workers``,
``lockstat`` stay files beside the table), interactive plots.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from . import _tables
from .studies import PROJECTED_PLOT

__all__ = ["build", "latest_runs"]

#: The file the report is written to, in the results root.
INDEX = "index.html"

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 80em; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ccc; margin-top: 2.5em; }
table { border-collapse: collapse; font-size: 12px; margin: 0.8em 0; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: right; white-space: nowrap; }
th { background: #f3f3f3; } .meta { color: #555; } .notes li { margin: 0.2em 0; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.5em 0; } nav a { margin-right: 1em; }
.scroll { overflow-x: auto; }
"""

# Counts the images that decoded (complete with a width) once the page has loaded.
_SCRIPT = """
window.addEventListener("load", () => {
  const imgs = [...document.images];
  const ok = imgs.filter((i) => i.complete && i.naturalWidth > 0).length;
  document.body.dataset.images = ok + "/" + imgs.length;
});
"""


def latest_runs(root: str | Path) -> list[Path]:
    """The newest run folder of each study under ``root`` (``root/<study>/<stamp>/`` holding a study's
    ``meta.json``), ordered by study name.

    Args:
        root: a results root, as ``alloclab reproduce --out`` writes it.

    Raises:
        ValueError: ``root`` is not a directory.
    """
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"root: {str(root)!r} is not a directory (give the results root of alloclab reproduce)")
    found = []
    for study_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        runs = sorted(p for p in study_dir.iterdir() if p.is_dir() and "study" in _meta(p))
        if runs:
            found.append(runs[-1])  # stamps sort in time order (YYYYmmddTHHMMSSZ, then -1, -2 ... on a clash)
    return found


def build(root: str | Path) -> Path:
    """Write ``root/index.html`` from the newest run of every study under ``root``; returns its path.

    Args:
        root: a results root, as ``alloclab reproduce --out`` writes it.

    Raises:
        ValueError: ``root`` is not a directory, or holds no study run.
    """
    runs = latest_runs(root)
    if not runs:
        raise ValueError(f"root: {str(root)!r} holds no study run (run `alloclab reproduce NAME --out {root}`)")
    sections = [_section(run) for run in runs]
    studies = [_meta(run)["study"]["name"] for run in runs]
    nav = " ".join(f'<a href="#{html.escape(s)}">{html.escape(s)}</a>' for s in studies)
    page = (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<title>alloclab: seed studies</title>"
        f"<style>{_STYLE}</style><script>{_SCRIPT}</script></head>\n<body>\n"
        "<h1>alloclab: the seed studies</h1>\n"
        f"<p class='meta'>{len(runs)} studies from <code>{html.escape(str(Path(root).resolve()))}</code>; each "
        "study's newest run. Ratios of real runs are findings only where marked significant; n.s. says why not."
        f"</p>\n<nav>{nav}</nav>\n" + "\n".join(sections) + "\n</body></html>\n"
    )
    path = Path(root) / INDEX
    path.write_text(page, encoding="utf-8")
    return path


def _meta(run: Path) -> dict[str, Any]:
    try:
        return json.loads((run / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _section(run: Path) -> str:
    """One study's section: heading, provenance line, tables, notes, plots."""
    meta = _meta(run)
    study = meta["study"]
    name = str(study["name"])
    mode = "quick" if study.get("quick") else "full"
    facts = [
        f"seed: {study.get('seed') or 'none'}",
        f"{mode} sizes",
        f"{float(study.get('elapsed_s', 0)):.1f} s",
        f"saved {meta.get('saved', '?')}",
        f"host {meta.get('hostname', '?')} ({meta.get('cpu_model', '?')})",
        f"git {str(meta.get('git_sha') or '?')[:10]}{' (dirty)' if meta.get('git_dirty') else ''}",
    ]
    if meta.get("machine"):
        facts.append(f"model machine {meta['machine']} ({meta.get('machine_hash', '?')})")
    parts = [
        f"<h2 id='{html.escape(name)}'>{html.escape(name)}: {html.escape(str(study.get('title', '')))}</h2>",
        f"<p class='meta'>{html.escape(' · '.join(facts))} · <code>{html.escape(str(run))}</code></p>",
    ]
    plots = [str(p) for p in study.get("plots") or []]
    claims = study.get("projected") or {}
    for claim, csv in claims.items():
        parts += [f"<p>The seed's claim, <b>{html.escape(str(claim))}</b>: published | virtual (the seed's machine) | "
                  "real (this host):</p>", _table(run / str(csv))]  # fmt: skip
    if claims and PROJECTED_PLOT in plots:  # the claim's figure beside its tables, not among the other plots
        plots.remove(PROJECTED_PLOT)
        parts.append(_image(run / PROJECTED_PLOT))
    parts.append(_table(run / str(study.get("table") or "table.parquet")))
    if study.get("published"):
        parts += ["<p>Published by the seed:</p>", _table(run / str(study["published"]))]
    notes = study.get("notes") or []
    if notes:
        parts.append("<ul class='notes'>" + "".join(f"<li>{html.escape(str(n))}</li>" for n in notes) + "</ul>")
    for plot in plots:
        parts.append(_image(run / plot))
    return "<section>\n" + "\n".join(parts) + "\n</section>"


def _table(path: Path) -> str:
    if not path.is_file():
        return f"<p><em>missing: {html.escape(path.name)}</em></p>"
    if path.suffix != ".parquet":
        return f"<p><em>{html.escape(path.name)}: a CSV table of an older alloclab, not read</em></p>"
    frame = _tables.read(path)
    return "<div class='scroll'>" + frame.to_html(index=False, na_rep="", float_format=_number, border=0) + "</div>"


def _number(x: float) -> str:
    return f"{x:.4g}"


def _image(path: Path) -> str:
    """The plot at ``path`` as an inline PNG (or a note when the file is missing)."""
    if not path.is_file():
        return f"<p><em>missing plot: {html.escape(path.name)}</em></p>"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f"<img alt='{html.escape(path.name)}' src='data:image/png;base64,{data}'>"
