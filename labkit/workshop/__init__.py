"""What a room of learners runs on: ``labkit doctor`` (is this machine fit to measure on), the hub checks behind
``doctor --hub``, the labs' cell times against the hub's idle culler, and ``labkit room collect``.
``labkit.doctor``, ``labkit.hub`` and ``labkit.room`` are the same modules under their old names."""

from labkit.lazy import submodules as _submodules

__all__: list[str] = []  # a family of modules, each imported by its own name
__getattr__ = _submodules(__name__, __path__)
