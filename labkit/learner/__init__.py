"""The learner's side of a lab: experiment records (hypothesis, prediction, verdict) and the guesses typed before
each measurement. ``labkit.record`` and ``labkit.guesses`` are the same modules under their old names."""

from labkit.lazy import submodules as _submodules

__all__: list[str] = []  # a family of modules, each imported by its own name
__getattr__ = _submodules(__name__, __path__)
