"""The command line's habits: global flags anywhere on the line, the config from -c, the environment or /etc, the
dev tools apart in --help, and one table of exit statuses that the reference page lists in full."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from canalbridge.daemon import cli, commands, exit_codes
from tests.configs import VALID, write

REPO = Path(__file__).resolve().parents[3]
CLI_PAGE = (REPO / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("line", [
    ["-c", "a.toml", "--log-level", "debug", "status", "shop"],
    ["status", "-c", "a.toml", "--log-level", "debug", "shop"],
    ["--log-level", "debug", "status", "shop", "--config", "a.toml"],
])
def test_the_global_flags_are_taken_before_the_command_and_after_it(line):
    args = cli.build_parser().parse_args(line)
    assert (args.command, args.job, args.config, args.log_level) == ("status", "shop", Path("a.toml"), "debug")


def test_a_flag_given_before_the_command_is_kept_when_the_command_does_not_repeat_it():
    args = cli.build_parser().parse_args(["--log-level", "warning", "pause", "shop"])
    assert args.log_level == "warning" and args.config is None


def test_the_config_comes_from_c_else_the_environment_else_etc():
    environ = {cli.CONFIG_VARIABLE: "/srv/cb.toml"}
    assert cli.config_path(Path("mine.toml"), environ) == (Path("mine.toml"), "-c")
    assert cli.config_path(None, environ) == (Path("/srv/cb.toml"), cli.CONFIG_VARIABLE)
    assert cli.config_path(None, {cli.CONFIG_VARIABLE: ""}) == (cli.DEFAULT_CONFIG, "the default")
    assert cli.DEFAULT_CONFIG == Path("/etc/canalbridge/canalbridge.toml")


def test_the_dev_tools_are_listed_apart_from_the_commands():
    text = cli.build_parser().format_help()
    commands, rest = text.split("development tools (not for production):")
    assert "demo" not in commands and "devserver" not in commands
    assert re.search(r"^  demo +the main job", rest, re.M) and re.search(r"^  devserver +run a Canal", rest, re.M)
    assert cli.build_parser().parse_args(["devserver", "--port", "0"]).port == 0


def test_stop_asks_for_confirmation_as_reset_and_rebuild_do():
    parser = cli.build_parser()
    for line in (["stop", "shop"], ["reset", "shop"], ["rebuild", "shop", "shop.t"]):
        assert parser.parse_args(line).yes is False and parser.parse_args([*line, "--yes"]).yes is True


def test_validate_snapshot_and_verify_print_json_when_asked():
    parser = cli.build_parser()
    for line in (["validate"], ["snapshot", "shop"], ["verify", "shop"], ["status"]):
        assert parser.parse_args([*line, "--json"]).json is True


def test_the_reference_page_lists_every_command_and_every_exit_status():
    table = CLI_PAGE.split("| command | what |", 1)[1].split("\n\n", 1)[0]
    listed = set(re.findall(r"^\| \[`(\w+)`\]", table, re.M))
    commands = set(cli.build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert listed == commands
    statuses = CLI_PAGE.split("## Exit status", 1)[1]
    assert set(map(int, re.findall(r"^\| (\d+) \|", statuses, re.M))) == set(exit_codes.SAID)


def test_an_unknown_command_or_none_is_a_usage_error(capsys):
    assert cli.main([]) == exit_codes.USAGE
    with pytest.raises(SystemExit) as raised:
        cli.main(["nosuch"])
    assert raised.value.code == exit_codes.USAGE


def test_a_config_named_by_the_environment_or_the_default_that_is_not_there_says_where_its_name_came_from(
        tmp_path, capsys):
    missing = tmp_path / "nowhere.toml"
    for chosen in (cli.CONFIG_VARIABLE, "the default"):
        with pytest.raises(exit_codes.CommandExit) as raised:
            commands.load(argparse.Namespace(config=missing, config_from=chosen))
        assert raised.value.status == exit_codes.USAGE
        error = capsys.readouterr().err
        assert f"{missing}: invalid configuration" in error and "the file does not exist" in error
        assert f"(the file {chosen} names: give another with -c FILE or CANALBRIDGE_CONFIG)" in error
    with pytest.raises(exit_codes.CommandExit):
        commands.load(argparse.Namespace(config=missing, config_from="-c"))
    assert "give another" not in capsys.readouterr().err


@pytest.mark.parametrize("flag, level", [(["--log-level", "info"], "info"), ([], "error")])
def test_run_logs_at_the_flags_level_when_given_even_info_else_at_the_configs(monkeypatch, tmp_path, flag, level):
    from canalbridge.daemon import service

    config = write(tmp_path, VALID.replace('state_dir = "state"', 'state_dir = "state"\nlog_level = "error"'))
    levels: list[str] = []
    monkeypatch.setattr(commands, "configure_logging", lambda chosen, fmt: levels.append(chosen))
    monkeypatch.setattr(service, "Daemon", lambda config, stop: argparse.Namespace(run=lambda: 0))
    monkeypatch.setattr(commands.signal, "signal", lambda *_: None)
    assert cli.main(["run", "-c", str(config), *flag]) == exit_codes.OK
    assert levels == [level]
