"""``labkit <command>``: a thin dispatcher; each command is a module of this package with ``main(argv) -> int``.

The commands parse their arguments and call the package that does the work (``labkit.workshop.doctor``,
``labkit.latency``, ``labkit.report``, ``labkit.service`` …); nothing here measures.
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["main", "COMMANDS"]

COMMANDS: dict[str, tuple[str, str]] = {
    "doctor": ("labkit.cli.doctor", "check this machine can run the labs, and say what to fix"),
    "serve": ("labkit.cli.serve", "run the toyshop service (and its catalog) in the foreground"),
    "data": ("labkit.cli.data", "build or check the toyshop dataset"),
    "latency": ("labkit.cli.latency", "measure the latency-numbers table on this machine"),
    "report": ("labkit.cli.report", "run a notebook and write one self-contained HTML report of it"),
    "new-review": ("labkit.cli.new_review", "start a design-review notebook from the template"),
    "new-lab": ("labkit.cli.new_lab", "start a new lab: its notebook, notes, grader and test, registered in the table"),
    "labs": ("labkit.cli.labs", "list the labs, and make README's and the index's tables equal to labkit/labs.py"),
    "workshop": ("labkit.cli.workshop", "the organiser's commands for one node: init, add-learners, check"),
    "budget": ("labkit.cli.budget", "read back the drift ledger of the tests' budgets (labkit.budget_plugin)"),
    "room": ("labkit.cli.room", "collect the learners' experiment records into one offline page for the instructor"),
}


def _usage() -> str:
    width = max(map(len, COMMANDS))
    rows = "\n".join(f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items())
    return f"usage: labkit <command> [options]\n\ncommands:\n{rows}\n\nlabkit <command> --help shows a command's options."


def main(argv: list[str] | None = None) -> int:
    """Run ``labkit <command> …`` and return its exit code."""
    from labkit.errors import LabkitError

    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"labkit: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(COMMANDS[name][0])
    except ImportError as e:
        print(f"labkit {name}: this command is not available ({e}); reinstall labkit with `pip install -e .`",
              file=sys.stderr)
        return 2
    try:
        return int(module.main(rest) or 0)
    except LabkitError as e:
        print(f"labkit {name}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"labkit {name}: interrupted", file=sys.stderr)
        return 130
    except SystemExit as e:  # argparse's --help (0) and usage errors (2): an exit code, as for every command
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)


if __name__ == "__main__":
    sys.exit(main())
