"""A notebook's parameters: declared in its ``parameters`` cell, typed by their defaults, set for one run.

    declared = declared_parameters(path)                 # {"SIZES_MB": "(5, 50)", "QUICK": "False"}
    typed = typed_parameters(path, parse_parameters(["SIZES_MB=5,50"]), declared)   # {"SIZES_MB": (5, 50)}

A value given on the command line arrives as the type of the parameter's default: a tuple parameter takes
``5,50``, ``(5, 50)`` and ``[5, 50]`` alike (and ``5`` as a one-item tuple), a float takes ``3``, a text takes
``123`` as the text ``"123"``; a value that cannot be that type (``ROUNDS=2.5`` for an integer) is refused,
naming the default. papermill writes a tuple as its text (``"(5, 50)"``), so :class:`TupleTranslator` writes
it as a tuple.
"""

from __future__ import annotations

import ast
import json
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from labkit.errors import BadInputError

__all__ = ["parse_parameters", "declared_parameters", "typed_parameters", "default_value", "effective",
           "differences", "use_tuple_translator", "suggest", "budget_parameters", "BUDGET_WORD"]

_UNKNOWN = object()
_ARITH = (ast.Expression, ast.Constant, ast.BinOp, ast.UnaryOp, ast.Tuple, ast.List, ast.Dict, ast.Load,
          ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Pow, ast.Mod, ast.USub, ast.UAdd)


def _literal(text: str) -> Any:
    """A Python literal, or plain arithmetic on literals (``10**6``, ``2 * 1024``); :data:`_UNKNOWN` otherwise."""
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        pass
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return _UNKNOWN
    if not all(isinstance(node, _ARITH) for node in ast.walk(tree)):
        return _UNKNOWN
    try:  # only constants and operators, checked above: nothing to call, nothing to name
        return eval(compile(tree, "<default>", "eval"), {"__builtins__": {}}, {})
    except Exception:
        return _UNKNOWN


def default_value(text: str | None) -> Any:
    """The value of a default as written in the parameters cell, or :data:`_UNKNOWN` when it is not a literal."""
    return _UNKNOWN if text is None else _literal(text)


def _plain(value: Any) -> bool:
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return value is None or isinstance(value, bool | int | float | str)


def parse_parameters(pairs: Sequence[str]) -> dict[str, Any]:
    """``["ROUNDS=10", "NAME=orjson"]`` → ``{"ROUNDS": 10, "NAME": "orjson"}``.

    Values are read as Python literals (numbers, True/False/None, quoted strings, tuples, lists, dicts);
    anything else is kept as text, as papermill's own command line does. :func:`typed_parameters` then
    makes each the type of the notebook's default.
    """
    params: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise BadInputError(f"-p {pair!r}: write each parameter as NAME=VALUE, e.g. -p ROUNDS=10 "
                                "or -p SIZES=10,100")
        value = _literal(text)
        value = text if value is _UNKNOWN else value
        if not _plain(value):
            raise BadInputError(f"-p {pair!r}: a parameter is a number, text, True/False/None, or a list, tuple or "
                                "dict of those (it is written into the notebook and kept in report.json)")
        params[name] = value
    return params


def declared_parameters(notebook: str | Path) -> dict[str, str]:
    """The notebook's parameters, as its ``parameters`` cell writes their defaults: ``{name: source text}``.

    An empty dict when it has no cell tagged ``parameters``.
    """
    import nbformat
    from papermill.translators import PythonTranslator

    nb = nbformat.read(str(notebook), as_version=4)
    cell = next((c for c in nb.cells if "parameters" in c.metadata.get("tags", ())), None)
    # papermill's inspect_notebook wants kernel metadata; the cell is read as Python whatever the metadata says
    found = PythonTranslator.inspect(cell) if cell is not None else []
    return {p.name: str(p.default) for p in found}


#: a parameter whose comment in the parameters cell starts with this word only budgets time (``MAX_TIME = 3.0
#: # budget: seconds a comparison may take``): it changes how long a measurement may run, not what it measures
BUDGET_WORD = "budget"


def budget_parameters(notebook: str | Path) -> frozenset[str]:
    """The parameters the notebook declares as time budgets: those whose comment begins ``# budget``. A baseline
    run with other budgets still measured the same thing, so it is compared without ``--compare-anyway``."""
    import nbformat
    from papermill.translators import PythonTranslator

    nb = nbformat.read(str(notebook), as_version=4)
    cell = next((c for c in nb.cells if "parameters" in c.metadata.get("tags", ())), None)
    found = PythonTranslator.inspect(cell) if cell is not None else []
    return frozenset(p.name for p in found if str(p.help or "").strip().lower().startswith(BUDGET_WORD))


def _kind(value: Any) -> str:
    return {bool: "True/False", int: "a whole number", float: "a number", str: "text", tuple: "a tuple",
            list: "a list", dict: "a dict"}.get(type(value), type(value).__name__)


def _as_type_of(default: Any, value: Any, raw: str | None) -> Any:
    """``value`` as the type of ``default``; raises ValueError when it cannot be."""
    if default is None:
        return value
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise ValueError
    if isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ValueError
    if isinstance(default, float):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise ValueError
    if isinstance(default, str):
        return value if isinstance(value, str) else (raw.strip() if raw is not None else str(value))
    if isinstance(default, tuple | list):
        if isinstance(value, str) and "," in value:   # -p NAMES=a,b is not a literal: each piece is
            value = [p.strip() if _literal(p) is _UNKNOWN else _literal(p) for p in value.split(",")]
        items = list(value) if isinstance(value, tuple | list) else [value]
        kinds = {type(d) for d in default}
        if len(kinds) == 1 and (only := kinds.pop()) in (int, float, str):
            items = [_as_type_of(only(), v, None) for v in items]
        return type(default)(items)
    if isinstance(default, dict):
        if isinstance(value, dict):
            return value
        raise ValueError
    return value


def typed_parameters(notebook: str | Path, params: Mapping[str, Any], declared: Mapping[str, str] | None = None,
                     raw: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``params`` made the types of the notebook's defaults (see the module docstring).

    Args:
        notebook: the notebook (named in errors).
        params: the values to set.
        declared: its declared parameters (:func:`declared_parameters`; read from ``notebook`` when None).
        raw: the text each value was parsed from on the command line, when it was.

    Raises:
        BadInputError: a value cannot be its parameter's type; the message names the default.
    """
    declared = declared_parameters(notebook) if declared is None else declared
    out: dict[str, Any] = {}
    for name, value in params.items():
        default = default_value(declared.get(name))
        if default is _UNKNOWN:
            out[name] = value
            continue
        text = (raw or {}).get(name)
        try:
            out[name] = _as_type_of(default, value, text)
        except (ValueError, TypeError):
            given = text if text is not None else repr(value)
            raise BadInputError(
                f"-p {name}={given}: {name} is {_kind(default)} in {Path(notebook).name} (its parameters cell "
                f"says {name} = {declared[name]}), and {given!r} is not; pass e.g. {suggest(name, default)}"
            ) from None
    return out


def suggest(name: str, default: Any) -> str:
    """A ``-p`` option for ``name`` set to ``default`` that a shell passes through as it is: a tuple or list of plain
    values as ``5,50`` (the form ``-p`` reads back as that type), anything else quoted where the shell would read it."""
    if isinstance(default, tuple | list) and default and all(_plain(v) and not isinstance(v, str) for v in default):
        return f"-p {name}={','.join(str(v) for v in default)}"
    return f"-p {shlex.quote(f'{name}={default!r}' if isinstance(default, str) else f'{name}={default}')}"


def effective(passed: Mapping[str, Any], declared: Mapping[str, str]) -> dict[str, Any]:
    """Every parameter's value in a run: the ones passed, the others at the default (as JSON values)."""
    values: dict[str, Any] = {}
    for name, text in declared.items():
        default = default_value(text)
        values[name] = text if default is _UNKNOWN else default
    values.update(passed)
    return {k: json.loads(json.dumps(v, default=str)) for k, v in values.items()}  # tuples and lists alike


def differences(now: Mapping[str, Any], then: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(name, now, then)`` for each parameter whose value differs between two runs (:func:`effective` values);
    a parameter only one run has is given as ``None`` on the other side."""
    missing = object()
    rows = []
    for name in [*now, *(k for k in then if k not in now)]:
        a, b = now.get(name, missing), then.get(name, missing)
        if a != b:
            rows.append((name, None if a is missing else a, None if b is missing else b))
    return rows


def use_tuple_translator() -> None:
    """Make papermill write tuple parameters as tuples (it writes any other type as its text)."""
    from papermill.translators import PythonTranslator, papermill_translators

    class TupleTranslator(PythonTranslator):
        @classmethod
        def translate(cls, val: Any) -> str:
            if isinstance(val, tuple):
                inner = ", ".join(cls.translate(v) for v in val)
                return f"({inner},)" if len(val) == 1 else f"({inner})"
            return super().translate(val)

    papermill_translators.register("python", TupleTranslator)
