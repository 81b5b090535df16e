"""The ``canalbridge`` command line."""

from __future__ import annotations

import argparse
import sys

from canalbridge import __version__
from canalbridge.daemon import commands, snapshot_command, verify_command
from canalbridge.daemon.logs import configure_logging


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="canalbridge", description="CDC bridge from Alibaba Canal into Iceberg tables through Spark."
    )
    parser.add_argument("--version", action="version", version=f"canalbridge {__version__}")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run the daemon in the foreground (as systemd does)")
    commands.add_config_argument(run)
    run.set_defaults(handler=commands.run, logs_configured_by_handler=True)

    validate = sub.add_parser("validate", help="check a configuration file and exit")
    commands.add_config_argument(validate)
    validate.set_defaults(handler=commands.validate)

    status = sub.add_parser("status", help="show the jobs: live from the daemon, else from the state store")
    commands.add_config_argument(status)
    status.add_argument("--json", action="store_true", help="print the stable JSON document")
    status.add_argument("job", nargs="?", help="only this job")
    status.set_defaults(handler=commands.status)

    for action, help_text in (("pause", "pause a job (nothing uncommitted is acked)"),
                              ("resume", "resume a paused job from Canal's ack position"),
                              ("stop", "stop a job for good (cancelled, as in Doris)")):
        command = sub.add_parser(action, help=help_text)
        commands.add_config_argument(command)
        command.add_argument("job")
        command.set_defaults(handler=commands.act, action=action)

    reset = sub.add_parser("reset", help="make a paused job forget where its channels stood (replay, rebuild, "
                                         "another source)")
    commands.add_config_argument(reset)
    reset.add_argument("job")
    reset.add_argument("--channel", action="append", default=[], metavar="TARGET",
                       help="only the channel writing this target (repeat for several); default: every channel")
    reset.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    reset.set_defaults(handler=commands.reset)

    rebuild = sub.add_parser("rebuild", help="make one table's target anew from the source (a snapshot) while the "
                                             "job's other tables stream on")
    commands.add_config_argument(rebuild)
    rebuild.add_argument("job")
    rebuild.add_argument("table", help="schema.table, the source table of a channel named for it")
    rebuild.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    rebuild.set_defaults(handler=commands.rebuild)

    snapshot = sub.add_parser("snapshot", help="snapshot a running job's tables again (a re-sync), or the rows "
                                               "--where takes (a back-fill), and show the progress")
    commands.add_config_argument(snapshot)
    snapshot_command.add_arguments(snapshot)
    snapshot.set_defaults(handler=snapshot_command.run)

    verify = sub.add_parser("verify", help="compare a running job's targets with their source, chunk by chunk, "
                                           "and print the chunks that differ")
    commands.add_config_argument(verify)
    verify_command.add_arguments(verify)
    verify.set_defaults(handler=verify_command.run)

    from canalbridge.devkit import demo
    from canalbridge.devkit import main as devserver_main

    demo_parser = sub.add_parser("demo", help="the main job on its embedded default, verified table by table")
    demo.add_arguments(demo_parser)
    demo_parser.set_defaults(handler=demo.main)

    devserver = sub.add_parser("devserver", help="run a Canal-protocol server for tests and demos")
    devserver_main.add_arguments(devserver)
    devserver.set_defaults(handler=devserver_main.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    if not getattr(args, "logs_configured_by_handler", False):
        configure_logging(args.log_level)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
