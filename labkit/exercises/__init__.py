"""Exercise graders, one module per lab (``labkit.exercises.lab00`` …); each returns a CheckResult.

Import the lab's module (``from labkit.exercises import lab02``): this face hands on no names of its own.
"""

__all__: list[str] = []
