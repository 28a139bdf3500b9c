"""Skeletons for the project's contributors: ``labkit new-lab NN name`` (:func:`new_lab`, in
:mod:`labkit.scaffold.newlab`) writes a new lab's notebook, notes, grader and test and registers it."""

from labkit.scaffold.newlab import NewLab, new_lab

__all__ = ["NewLab", "new_lab"]
