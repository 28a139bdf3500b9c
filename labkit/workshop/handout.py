"""Each learner's copy of the labs: the notebooks only (never ``notebooks/instructor/``, the answers), refreshed
without losing a learner's edits.

``labkit workshop add-learners`` calls :func:`hand_out` for every learner. The copy keeps a manifest
(``.perflab-handout.json``: each file's digest as handed out), so a second run can tell a learner's edit from an
old version: a file the learner has not touched is replaced by the new version; an edited file is kept, and a
changed upstream version is written beside it (``NAME.new.ipynb``) and named in what the run returns — the way
nbgitpuller merges, without git.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from labkit.errors import ResultsError

__all__ = ["MANIFEST", "Handout", "lab_files", "hand_out"]

MANIFEST = ".perflab-handout.json"


@dataclass
class Handout:
    """What one run did to one learner's copy: files by what happened to them."""

    folder: Path
    copied: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # edited by the learner; the new version written beside it
    unchanged: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """What to tell the organiser, one line per kind of change."""
        out = []
        for label, names in (("copied", self.copied), ("updated", self.updated)):
            if names:
                out.append(f"{label}: {', '.join(names)}")
        for name in self.kept:
            out.append(f"kept the learner's edited {name}; the new version is beside it as {_beside(name)}")
        return out or ["already up to date"]


def lab_files(notebooks: Path) -> list[Path]:
    """The files a learner gets: the notebooks at the top of ``notebooks/`` (no folder below it: instructor/)."""
    return sorted(p for p in notebooks.glob("*.ipynb") if p.is_file())


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _beside(name: str) -> str:
    stem, dot, ext = name.rpartition(".")
    return f"{stem}.new.{ext}" if dot else f"{name}.new"


def hand_out(notebooks: Path, folder: Path, owner: tuple[int, int] | None = None) -> Handout:
    """Copy or refresh the labs from ``notebooks`` into ``folder``, never overwriting a learner's edit.

    Args:
        notebooks: the repository's ``notebooks/`` folder.
        folder: the learner's copy (``~learner/perflab``), created if missing.
        owner: ``(uid, gid)`` to give every file written (the organiser runs this as root), or None.

    Raises:
        ResultsError: the folder cannot be written, naming it.
    """
    result = Handout(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        manifest_path = folder / MANIFEST
        try:
            manifest: dict[str, str] = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            manifest = {}
        written: list[Path] = [folder]
        for src in lab_files(notebooks):
            name, new = src.name, _digest(src)
            dst = folder / name
            if not dst.exists():
                shutil.copyfile(src, dst)
                result.copied.append(name)
            elif (have := _digest(dst)) == new:
                result.unchanged.append(name)
            elif manifest.get(name) == have:  # untouched since handed out: the new version replaces it
                shutil.copyfile(src, dst)
                result.updated.append(name)
            else:  # the learner's edit: keep it, put the new version beside it
                if manifest.get(name) == new:  # nothing new upstream: the edit simply stays
                    result.unchanged.append(name)
                    continue
                shutil.copyfile(src, folder / _beside(name))
                written.append(folder / _beside(name))
                result.kept.append(name)
                continue  # the manifest keeps the old digest: the learner's file is still not the new version
            written.append(dst)
            manifest[name] = new
        manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        written.append(manifest_path)
        if owner is not None:
            for p in written:
                os.chown(p, *owner)
    except OSError as e:
        raise ResultsError(f"cannot hand out the labs into {folder}: {e.strerror or e}; run "
                           "`labkit workshop add-learners` as root (it writes into the learners' homes)") from e
    return result
