"""The performance core's view of toyshop's switches: the ones the core reads itself, and their checks.

The switches are declared once, in :data:`labkit.toyshop.switches.TABLE` (reference: ``docs/switches.md``);
this module keeps those marked ``core`` (``layout``, ``buffers``, ``codec``, ``compress``, ``fields``,
``cache``), so the core stays importable and checkable on its own, without the service. Labs read
:data:`VARIANTS` to run every value side by side.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from labkit.toyshop.switches import TABLE, check

__all__ = ["VARIANTS", "DEFAULTS", "check_variant", "resolve_variants"]

#: switch name -> allowed values, the default (slow baseline) first.
VARIANTS: Mapping[str, tuple[str, ...]] = MappingProxyType({s.name: s.values for s in TABLE if s.core})

#: switch name -> default value (the first allowed value).
DEFAULTS: Mapping[str, str] = MappingProxyType({name: values[0] for name, values in VARIANTS.items()})


def check_variant(switch: str, value: str) -> str:
    """Return ``value`` if it is an allowed value of ``switch``, else raise.

    Raises :class:`labkit.errors.BadInputError` naming the switch, the bad value and the allowed values.
    """
    return check(switch, value, VARIANTS, "the performance core's")


def resolve_variants(choices: Mapping[str, str] | None = None, *, ignore_unknown: bool = False) -> dict[str, str]:
    """Validate ``choices`` and fill in the defaults: returns a dict with every switch of :data:`VARIANTS`.

    ``ignore_unknown=True`` skips keys that are not core switches (e.g. the service's other query
    parameters); otherwise an unknown key raises :class:`labkit.errors.BadInputError`.
    """
    resolved = dict(DEFAULTS)
    for switch, value in (choices or {}).items():
        if switch not in VARIANTS and ignore_unknown:
            continue
        resolved[switch] = check_variant(switch, value)
    return resolved
