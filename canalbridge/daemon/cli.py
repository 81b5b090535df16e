"""The ``canalbridge`` command line: its commands, the flags every command takes anywhere on the line, and where the
config comes from."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from canalbridge import __version__
from canalbridge.daemon import commands, cuts_command, exit_codes, snapshot_command, verify_command
from canalbridge.daemon.logs import configure_logging

CONFIG_VARIABLE = "CANALBRIDGE_CONFIG"
DEFAULT_CONFIG = Path("/etc/canalbridge/canalbridge.toml")
LOG_LEVELS = ("debug", "info", "warning", "error")
DEV_TOOLS = (("demo", "the main job on its embedded default, verified table by table"),
             ("devserver", "run a Canal-protocol server for tests and demos"))


def global_flags(*, after_command: bool) -> argparse.ArgumentParser:
    """The flags taken before the command and after it. After it they default to nothing at all, so that a flag
    given before the command is not overwritten by the command's own default."""
    flags = argparse.ArgumentParser(add_help=False)
    unset = argparse.SUPPRESS if after_command else None
    flags.add_argument("-c", "--config", type=Path, default=unset, metavar="FILE",
                       help=f"the TOML configuration file (default: ${CONFIG_VARIABLE}, else {DEFAULT_CONFIG})")
    flags.add_argument("--log-level", default=unset, choices=LOG_LEVELS,
                       help="the least level logged (default: info; for run, the config's daemon.log_level)")
    return flags


def build_parser() -> argparse.ArgumentParser:
    dev_tools = "\n".join(f"  {name:<11}{text}" for name, text in DEV_TOOLS)
    parser = argparse.ArgumentParser(
        prog="canalbridge", description="CDC bridge from Alibaba Canal into Iceberg tables through Spark.",
        parents=[global_flags(after_command=False)], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"development tools (not for production):\n{dev_tools}\n\nexit statuses:\n"
               + "\n".join(f"  {status:<11}{said}" for status, said in exit_codes.SAID.items()))
    parser.add_argument("--version", action="version", version=f"canalbridge {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    after = [global_flags(after_command=True)]

    def command(name: str, help_text: str, handler: object, **defaults: object) -> argparse.ArgumentParser:
        each = sub.add_parser(name, help=help_text, description=help_text, parents=after)
        each.set_defaults(handler=handler, reads_config=True, **defaults)
        return each

    command("run", "run the daemon in the foreground (as systemd does)", commands.run,
            logs_configured_by_handler=True)

    validate = command("validate", "check a configuration file and exit", commands.validate)
    validate.add_argument("--offline", action="store_true",
                          help="check the file alone: connect to nothing and read no secret (for a CI pipeline)")
    validate.add_argument("--json", action="store_true", help="print the result as one JSON document")

    status = command("status", "show the jobs: live from the daemon, else from the state store", commands.status)
    status.add_argument("--json", action="store_true", help="print the stable JSON document")
    status.add_argument("job", nargs="?", help="only this job")

    for action, help_text in (("pause", "pause a job (nothing uncommitted is acked)"),
                              ("resume", "resume a paused job from Canal's ack position")):
        command(action, help_text, commands.act, action=action).add_argument("job")
    stop = command("stop", "stop a job for good (cancelled, as in Doris)", commands.stop)
    stop.add_argument("job")
    stop.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    reset = command("reset", "make a paused job forget where its channels stood (replay, rebuild, another source)",
                    commands.reset)
    reset.add_argument("job")
    reset.add_argument("--channel", action="append", default=[], metavar="TARGET",
                       help="only the channel writing this target (repeat for several); default: every channel")
    reset.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    rebuild = command("rebuild", "make one table's target anew from the source (a snapshot) while the job's other "
                                 "tables stream on", commands.rebuild)
    rebuild.add_argument("job")
    rebuild.add_argument("table", help="schema.table, the source table of a channel named for it")
    rebuild.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    snapshot_command.add_arguments(command(
        "snapshot", "snapshot a running job's tables again (a re-sync), or the rows --where takes (a back-fill), "
                    "and show the progress", snapshot_command.run))
    verify_command.add_arguments(command(
        "verify", "compare a running job's targets with their source, chunk by chunk, and print the chunks that "
                  "differ", verify_command.run))

    cuts_command.add_arguments(command(
        "cuts", "show a running job's newest consistent cut: the tag every target carries at the same source "
                "position, and each target's snapshot there", cuts_command.run))

    from canalbridge.devkit import demo
    from canalbridge.devkit import main as devserver_main

    # Named without a help text, so that --help lists them apart (the epilog), not among the commands.
    for (name, text), add, handler in zip(DEV_TOOLS, (demo.add_arguments, devserver_main.add_arguments),
                                          (demo.main, devserver_main.run), strict=True):
        tool = sub.add_parser(name, description=text, parents=after)
        add(tool)
        tool.set_defaults(handler=handler)
    return parser


def config_path(given: Path | None, environ: Mapping[str, str]) -> tuple[Path, str]:
    """The config file and where its name came from: ``-c``, else the environment variable, else the default."""
    if given is not None:
        return given, "-c"
    if environ.get(CONFIG_VARIABLE):
        return Path(environ[CONFIG_VARIABLE]), CONFIG_VARIABLE
    return DEFAULT_CONFIG, "the default"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return exit_codes.USAGE
    if getattr(args, "reads_config", False):
        args.config, args.config_from = config_path(args.config, os.environ)
    if not getattr(args, "logs_configured_by_handler", False):
        configure_logging(args.log_level or "info")
    try:
        return int(args.handler(args))
    except exit_codes.CommandExit as exc:
        return exc.status


if __name__ == "__main__":
    sys.exit(main())
