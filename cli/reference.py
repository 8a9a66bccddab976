"""The commands reference, docs/reference/commands.md, written from the command line's
own parsers (`build_parser` of main.py, and the client tool's, which parses its own
flags): every command and subcommand with its usage and each option's default and help.
docs/generate.py writes it; a unit test fails when the page is stale."""

from __future__ import annotations

import argparse
import enum
from collections.abc import Callable, Iterator

from pinledger.cli import main, tool_options
from pinledger.client.worker import runner

# Commands whose arguments another parser reads: `pinledger client ...` is handed whole
# to the client tool and `pinledger worker ...` to the worker runner (main.main), so
# their page sections show those parsers.
OWN_PARSERS: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "client": tool_options.build_parser,
    "worker": runner.build_parser,
}
# The usage lines are wrapped at a fixed width, not the terminal's, so that the page is
# the same wherever it is generated.
WIDTH = 88
# argparse's titles of its own two groups (Python 3.10 renamed "optional arguments").
_PLAIN_GROUPS = {"positional arguments", "options", "optional arguments"}


def _fixed_width(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=WIDTH)
    return parser


def _cell(text: str) -> str:
    """Help text as Markdown on one line: `<p>` in a descriptor's pattern is text, not
    HTML; `10**11` is not the start of bold; a pipe does not end the table's cell."""
    text = " ".join(text.split())
    for raw, escaped in (("<", "&lt;"), (">", "&gt;"), ("*", "\\*"), ("|", "\\|")):
        text = text.replace(raw, escaped)
    return text


def _default(action: argparse.Action) -> str:
    value = action.default
    empty = isinstance(value, str | list) and not value
    if value is None or value is False or value == argparse.SUPPRESS or empty:
        return ""
    if isinstance(action, argparse._StoreConstAction) and value == action.const:
        return ""
    if isinstance(value, enum.Enum):
        return f"`{value.name}`"
    return f"`{value}`"


def _names(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    flags = ", ".join(action.option_strings)
    if action.nargs == 0:
        return f"`{flags}`"
    if isinstance(action.metavar, tuple):  # one name per value (nargs=2: `A B`)
        metavar = " ".join(action.metavar)
    else:
        metavar = action.metavar or action.dest.upper()
    if action.nargs == "?":
        return f"`{flags} [{metavar}]`"
    return f"`{flags} {metavar}`"


def _visible(actions: list[argparse.Action]) -> list[argparse.Action]:
    return [
        a
        for a in actions
        if a.help != argparse.SUPPRESS
        and not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
    ]


def _options(parser: argparse.ArgumentParser) -> list[str]:
    """A table of the parser's arguments: argparse's own groups (positionals, then
    options) in one, then one per argument group the parser adds, under its title."""
    formatter = argparse.HelpFormatter(parser.prog, width=WIDTH)
    plain = [g for g in parser._action_groups if g.title in _PLAIN_GROUPS]
    titled = [g for g in parser._action_groups if g.title not in _PLAIN_GROUPS]
    tables: list[tuple[str | None, list[argparse.Action]]] = [
        (None, [a for g in plain for a in _visible(g._group_actions)])
    ]
    tables += [(g.title, _visible(g._group_actions)) for g in titled]
    lines: list[str] = []
    for title, actions in tables:
        if not actions:
            continue
        if title:
            lines += [f"**{title}**", ""]
        lines += ["| argument | default | what it does |", "|---|---|---|"]
        for action in actions:
            text = formatter._expand_help(action) if action.help else ""
            lines.append(f"| {_names(action)} | {_default(action)} | {_cell(text)} |")
        lines.append("")
    return lines


def _subcommands(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each subcommand, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _section(title: str, summary: str, parser: argparse.ArgumentParser) -> list[str]:
    usage = _fixed_width(parser).format_usage().strip()
    lines = [f"## `{title}`", ""]
    if summary:
        lines += [_cell(summary[0].upper() + summary[1:]) + ".", ""]
    lines += ["```text", usage, "```", ""]
    lines += _options(parser)
    if parser.epilog:
        lines += [_cell(parser.epilog), ""]
    for name, help_text, sub in _subcommands(parser):
        lines += _section(f"{title} {name}", help_text, sub)
    return lines


def commands_page() -> str:
    """The page's Markdown."""
    top = _fixed_width(main.build_parser())
    lines = [
        "<!-- Generated by docs/generate.py from the command line's parsers "
        "(cli/): edit the arguments there, then run `python docs/generate.py`. -->",
        "",
        "# Commands",
        "",
        "Every command of `pinledger` (also `python -m pinledger`) and every argument it",
        "takes, as its parser defines them; `pinledger COMMAND --help` prints the same.",
        "Every command reads the settings first ([Settings](settings.md)); what the",
        "commands are for: [The command line](../operations/command-line.md).",
        "",
        "## `pinledger`",
        "",
        "```text",
        top.format_usage().strip(),
        "```",
        "",
        *_options(top),
    ]
    for name, help_text, sub in _subcommands(top):
        parser = OWN_PARSERS[name]() if name in OWN_PARSERS else sub
        lines += _section(f"pinledger {name}", help_text, parser)
    return "\n".join(lines).rstrip("\n") + "\n"
