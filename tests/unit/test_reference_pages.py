"""The generated reference pages say everything their source holds: every command and
argument of the command line (docs/reference/commands.md), every method, struct,
field, enum value and constant of the IDL as thriftpy2 loads it, with pinledger's
additions marked (docs/reference/thrift.md). That the files match what the generators
write now is tests/unit/test_generated_docs.py's."""

from __future__ import annotations

import argparse
import re

import pytest

from pinledger.cli import main, tool_options
from pinledger.cli.reference import commands_page
from pinledger.idl import pinlater
from pinledger.service.api import idl_reference
from pinledger.service.api.idl_reference import parse, thrift_page


def _sections(page: str) -> dict[str, str]:
    """Each `## ` or `### ` section's title and its text."""
    parts = re.split(r"^#{2,3} (.+)$", page, flags=re.MULTILINE)
    return {parts[i].strip("` "): parts[i + 1] for i in range(1, len(parts), 2)}


def _commands(parser: argparse.ArgumentParser, prefix: str) -> dict[str, argparse.ArgumentParser]:
    found = {prefix: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= _commands(sub, f"{prefix} {name}")
    return found


def test_every_command_and_argument_is_on_the_commands_page() -> None:
    sections = _sections(commands_page())
    commands = _commands(main.build_parser(), "pinledger")
    commands["pinledger client"] = tool_options.build_parser()
    for title, parser in commands.items():
        assert title in sections, f"no section for `{title}`"
        text = sections[title]
        for action in parser._actions:
            if action.help == argparse.SUPPRESS or isinstance(
                action, argparse._HelpAction | argparse._SubParsersAction
            ):
                continue
            for flag in action.option_strings or [str(action.metavar or action.dest)]:
                assert f"`{flag}" in text or f", {flag}" in text, f"{title}: {flag} is missing"


def test_hidden_arguments_stay_off_the_commands_page() -> None:
    # `serve --worker` and `--supervisor` are set by the supervisor for its processes.
    serve = _sections(commands_page())["pinledger serve"]
    assert "--processes" in serve
    assert "--worker" not in serve and "--supervisor" not in serve


def test_every_part_of_the_idl_is_on_the_thrift_page() -> None:
    page = thrift_page()
    sections = _sections(page)
    meta = pinlater.__thrift_meta__
    for method in pinlater.PinLater.thrift_services:
        assert method in sections, f"no section for the method {method}"
    for struct in [*meta["structs"], *meta["exceptions"]]:
        assert struct.__name__ in sections, f"no section for {struct.__name__}"
        text = sections[struct.__name__]
        for field_id, spec in struct.thrift_spec.items():
            assert f"| {field_id} | `{spec[1]}` |" in text, f"{struct.__name__}.{spec[1]}"
    for enum in meta["enums"]:
        text = sections[enum.__name__]
        for value, name in enum._VALUES_TO_NAMES.items():
            assert f"| `{name}` | {value} |" in text, f"{enum.__name__}.{name}"
    for name in ("CONTINUATION_START", "CONTINUATION_END"):
        assert f"`{name}`" in sections["Constants"]


def test_pinledgers_additions_are_marked_and_pinlaters_methods_are_not() -> None:
    sections = _sections(thrift_page())
    added = "*A pinledger addition.*"
    for name in ("dequeueOwned", "getJobHistory", "PinLaterJobHistory", "PinLaterJobAttempt"):
        assert added in sections[name], name
    for name in ("dequeueJobs", "enqueueJobs", "PinLaterJob", "RequestContext"):
        assert added not in sections[name], name
    response = sections["PinLaterDequeueResponse"].splitlines()
    traceparents = next(line for line in response if "jobTraceparents" in line)
    assert "pinledger addition" in traceparents


@pytest.mark.parametrize(
    "idl",
    [
        "struct A {\n  1: required string a\n  two: string b,\n}\n",
        "enum E {\n  A = x,\n}\n",
        "service S {\n  void f(1: string a)\n}\n",
        "struct A {\n  1: required string a,\n",
        "typedef i64 Millis\n",
    ],
)
def test_the_idl_reader_refuses_what_it_does_not_understand(idl: str) -> None:
    """An IDL construct the page cannot show stops the generator, not the page's truth."""
    with pytest.raises(ValueError):
        parse(idl)


def test_a_comment_above_a_field_documents_it_and_a_blank_line_drops_it() -> None:
    idl = parse(
        "// dropped: a blank line follows\n\nstruct A {\n  // the a\n  1: required string a,\n"
        "  2: optional map<string, binary> b = {},\n}\n"
    )
    [struct] = idl.definitions
    assert struct.doc == ""
    assert [(f.name, f.type, f.doc) for f in struct.fields] == [
        ("a", "string", "the a"),
        ("b", "map<string, binary>", ""),
    ]
    assert idl_reference._text("see docs/security.md") == "see [security.md](../security.md)"
