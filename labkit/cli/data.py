"""``labkit data build [--size small|default|large] [--force]`` and ``labkit data path``."""

from __future__ import annotations

import argparse

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Build (or locate) the toyshop dataset; print its path."""
    from labkit.toyshop.dataset import SIZES, ensure, locate

    parser = argparse.ArgumentParser(prog="labkit data", description="Build or locate the toyshop dataset.")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the dataset if missing, stale or corrupt")
    b.add_argument("--size", choices=list(SIZES), default="small")
    b.add_argument("--force", action="store_true", help="rebuild even if the file is sound")
    p = sub.add_parser("path", help="print the dataset's path (the one labs use: your own copy or the shared one)")
    p.add_argument("--size", choices=list(SIZES), default="small")
    args = parser.parse_args(argv)
    if args.command == "path":
        print(locate(args.size))
        return 0
    print(ensure(args.size, force=args.force))
    return 0
