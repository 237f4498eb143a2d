"""``python -m kpo.api [--check] [DIR]``: write the CRDs to DIR (default ``crds``), or check they are up to date."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kpo.api.crdfiles import stale_files, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kpo.api", description=__doc__)
    parser.add_argument("directory", nargs="?", default="crds", type=Path, help="where the CRD files live")
    parser.add_argument("--check", action="store_true", help="only report files that differ; exit 1 if any")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files(args.directory)
        for name in stale:
            print(f"{args.directory / name} is out of date: run `make crds`", file=sys.stderr)
        return 1 if stale else 0
    for path in write(args.directory):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
