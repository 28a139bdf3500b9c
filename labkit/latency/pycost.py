"""What the interpreter adds to every line: a call, an attribute access, a dict lookup, a small allocation.

These rows put Python's own costs on the same ladder as the hardware, so a learner can see, for example,
how many cache hits one attribute access is worth.
"""

from __future__ import annotations

from labkit.latency._harness import Samples, method_of, python_cost

__all__ = ["python_costs"]

_SETUP = """
class C:
    def __init__(self):
        self.x = 1
class P:
    __slots__ = ("x", "y")
def f():
    pass
o = C()
d = {str(i): i for i in range(100)}
k = "42"
"""

_ROWS = (
    ("python_call", "Python: call an empty function", "f()"),
    ("python_attr", "Python: read an instance attribute", "o.x"),
    ("python_dict", "Python: dict lookup (str key, 100 items)", "d[k]"),
    ("python_alloc", "Python: allocate a small object (and free it)", "P()"),
)


def python_costs(*, quick: bool = False, number: int | None = None,
                 repeats: int | None = None) -> tuple[Samples, ...]:
    """Cost of four everyday Python operations, each net of the loop that repeats it.

    Method: ``timeit`` runs the statement (``f()``, ``o.x``, ``d[k]``, ``P()`` on a 2-slot class) in its
    compiled loop, then an empty statement the same number of times; a sample is the difference divided
    by the count. The subtracted loop cost (a few ns per iteration) is kept in ``extra``; what remains
    includes loading the names the statement uses, which every real line pays too. The allocation row
    includes freeing the object right away (reference count reaches zero), as a temporary does.
    """
    method = method_of(python_costs)
    number = number or (5_000 if quick else 10_000)
    repeats = repeats or (21 if quick else 51)
    out = []
    for key, label, stmt in _ROWS:
        samples, loop_ns = python_cost(stmt, _SETUP, number=number, repeats=repeats)
        out.append(Samples(key, label, "python", samples, method, None,
                           {"statement": stmt, "loop_ns_subtracted": loop_ns, "number": number}))
    return tuple(out)
