"""The ``canalbridge`` command line."""

from __future__ import annotations

import argparse
import sys

from canalbridge import __version__
from canalbridge.logs import configure_logging


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="canalbridge", description="CDC bridge from Alibaba Canal into Iceberg tables through Spark."
    )
    parser.add_argument("--version", action="version", version=f"canalbridge {__version__}")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    from canalbridge.devserver import main as devserver_main

    devserver = commands.add_parser(
        "devserver", help="run a Canal-protocol server for tests and demos (not a binlog parser)"
    )
    devserver_main.add_arguments(devserver)
    devserver.set_defaults(handler=devserver_main.run)

    from canalbridge import demo

    demo_parser = commands.add_parser("demo", help="feed a generated workload through the dev server and verify it")
    demo.add_arguments(demo_parser)
    demo_parser.set_defaults(handler=demo.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    configure_logging(args.log_level)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
