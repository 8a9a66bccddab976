"""The Thrift API reference, docs/reference/thrift.md, written from the IDL itself
(thrift/pinlater.thrift, the only copy): every method, struct, field, enum and
constant, with the IDL's comments, pinledger's additions marked. docs/generate.py
writes it; a unit test fails when the page is stale, and another holds it to what
thriftpy2 loads from the same file.

The IDL is read line by line, as it is written: a run of `//` lines right above a
definition, a field or a method is its comment (a blank line in between drops it), and
a `// ---- pinledger additions ... ----` line marks what follows, to the end of its
block (or of the file), as pinledger's; so does a field comment that starts with
"pinledger addition".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pinledger.idl import IDL_RESOURCE

_FIELD = re.compile(
    r"^(?P<id>\d+):\s*(?:(?P<req>required|optional)\s+)?(?P<type>.+?)\s+(?P<name>\w+)"
    r"(?:\s*=\s*(?P<default>.+?))?,?$"
)
_BLOCK = re.compile(r"^(?P<kind>enum|struct|exception|service)\s+(?P<name>\w+)\s*\{$")
_ENUM_VALUE = re.compile(r"^(?P<name>\w+)\s*=\s*(?P<value>-?\d+),?$")
_CONST = re.compile(r"^const\s+(?P<type>\w+)\s+(?P<name>\w+)\s*=\s*(?P<value>.+)$")
_METHOD = re.compile(
    r"^(?P<returns>.+?)\s+(?P<name>\w+)\((?P<args>[^)]*)\)\s*throws\s*\((?P<throws>[^)]*)\)$"
)
_ADDITIONS = re.compile(r"^//\s*-+\s*pinledger additions")
_DOC = re.compile(r"\bdocs/([\w/.-]+?\.md)")
_ADDED = "pinledger addition"


@dataclass
class Field:
    id: int
    requiredness: str
    type: str
    name: str
    default: str
    doc: str
    added: bool


@dataclass
class Definition:
    kind: str  # enum, struct, exception, service
    name: str
    doc: str
    added: bool
    fields: list[Field] = field(default_factory=list)  # struct, exception
    values: list[tuple[str, int]] = field(default_factory=list)  # enum
    methods: list[Method] = field(default_factory=list)  # service


@dataclass
class Method:
    name: str
    signature: str
    returns: str
    args: list[Field]
    doc: str
    added: bool


@dataclass
class Idl:
    definitions: list[Definition]
    constants: list[tuple[str, str, str, str]]  # type, name, value, comment


def _args(text: str) -> list[Field]:
    parts = [p.strip() for p in re.split(r",(?![^<]*>)", text) if p.strip()]
    out = []
    for part in parts:
        match = _FIELD.match(part)
        if match is None:
            raise ValueError(f"the IDL's argument {part!r} is not `N: type name`")
        out.append(_field(match, "", added=False))
    return out


def _field(match: re.Match[str], doc: str, *, added: bool) -> Field:
    return Field(
        id=int(match["id"]),
        requiredness=match["req"] or "",
        type=" ".join(match["type"].split()),
        name=match["name"],
        default=match["default"] or "",
        doc=doc,
        added=added or doc.lower().startswith(_ADDED),
    )


class _Reader:
    """The IDL's lines, one at a time: the comment waiting for what it documents, the
    block being read, and whether a "pinledger additions" line came before."""

    def __init__(self) -> None:
        self.idl = Idl([], [])
        self.comment: list[str] = []
        self.top_additions = False  # past a "pinledger additions" line outside any block
        self.block: Definition | None = None
        self.block_additions = False  # past one inside the block
        self.pending = ""  # a method's lines, until its `throws (...)`
        self.method_doc = ""

    def line(self, line: str) -> None:
        if _ADDITIONS.match(line):
            if self.block is None:
                self.top_additions = True
            else:
                self.block_additions = True
            self.comment = []
        elif line.startswith("//"):
            self.comment.append(line[2:].strip())
        elif not line:
            self.comment = []
        else:
            doc, self.comment = " ".join(self.comment), []
            if self.block is None:
                self.top(line, doc)
            elif line == "}":
                self.close(self.block)
            else:
                self.inside(self.block, line, doc)

    def top(self, line: str, doc: str) -> None:
        if (opened := _BLOCK.match(line)) is not None:
            # The service is PinLater's; what pinledger adds to it is marked inside.
            added = self.top_additions and opened["kind"] != "service"
            self.block = Definition(opened["kind"], opened["name"], doc, added)
            self.block_additions = False
        elif (const := _CONST.match(line)) is not None:
            self.idl.constants.append((const["type"], const["name"], const["value"], doc))
        elif not line.startswith("namespace "):
            raise ValueError(f"the IDL's line {line!r} is not understood")

    def close(self, block: Definition) -> None:
        if self.pending:
            raise ValueError(f"service {block.name}: {self.pending!r} has no `throws (...)`")
        self.idl.definitions.append(block)
        self.block = None

    def inside(self, block: Definition, line: str, doc: str) -> None:
        if block.kind == "enum":
            value = _ENUM_VALUE.match(line)
            if value is None:
                raise ValueError(f"enum {block.name}: {line!r} is not `NAME = N,`")
            block.values.append((value["name"], int(value["value"])))
        elif block.kind == "service":
            self.method_line(block, line, doc)
        else:
            match = _FIELD.match(line)
            if match is None:
                raise ValueError(f"struct {block.name}: {line!r} is not a field")
            block.fields.append(_field(match, doc, added=self.block_additions))

    def method_line(self, block: Definition, line: str, doc: str) -> None:
        if not self.pending:
            self.method_doc = doc
        self.pending = f"{self.pending} {line}".strip()
        method = _METHOD.match(self.pending)
        if method is None:  # its arguments or its throws go on on the next line
            return
        block.methods.append(
            Method(
                name=method["name"],
                signature=" ".join(self.pending.replace("( ", "(").split()),
                returns=method["returns"],
                args=_args(method["args"]),
                doc=self.method_doc,
                added=self.block_additions,
            )
        )
        self.pending = ""


def parse(text: str) -> Idl:
    """The IDL's definitions, in the order it gives them."""
    reader = _Reader()
    for line in text.splitlines():
        reader.line(line.strip())
    if reader.block is not None:
        raise ValueError(f"the IDL ends inside {reader.block.kind} {reader.block.name}")
    return reader.idl


def _text(text: str) -> str:
    """A comment of the IDL as Markdown: a page it names under docs/ becomes a link
    (from docs/reference/), `<` is text, a pipe does not end a table's cell."""
    text = text.replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")
    return _DOC.sub(lambda m: f"[{m.group(1)}](../{m.group(1)})", text)


def _type(name: str, defined: set[str]) -> str:
    return f"[`{name}`](#{name.lower()})" if name in defined else f"`{name}`"


def _struct(definition: Definition, defined: set[str]) -> list[str]:
    lines = [f"### {definition.name}", ""]
    if definition.added:
        lines += ["*A pinledger addition.*", ""]
    if definition.kind == "exception":
        lines += [
            "An exception: every method declares it as `throws (1: PinLaterException e)`.",
            "",
        ]
    if definition.doc:
        lines += [_text(definition.doc), ""]
    lines += ["| id | field | type | presence | default | notes |", "|---|---|---|---|---|---|"]
    for f in sorted(definition.fields, key=lambda f: f.id):
        notes = _text(f.doc)
        if f.added and not f.doc.lower().startswith(_ADDED):
            notes = f"pinledger addition. {notes}".strip()
        default = f"`{f.default}`" if f.default else ""
        lines.append(
            f"| {f.id} | `{f.name}` | {_type(f.type, defined)} | {f.requiredness} | "
            f"{default} | {notes} |"
        )
    return [*lines, ""]


def _service(definition: Definition, defined: set[str]) -> list[str]:
    lines: list[str] = []
    for method in definition.methods:
        lines += [f"### {method.name}", ""]
        if method.added:
            lines += ["*A pinledger addition.*", ""]
        lines += ["```thrift", method.signature, "```", ""]
        if method.doc:
            lines += [_text(method.doc), ""]
        # The signature again with its types linked to their sections below.
        takes = [a for a in method.args if a.name != "context"]
        args = ", ".join(f"{_type(a.type, defined)} `{a.name}`" for a in takes) or "nothing"
        lines += [f"Takes: {args}. Returns: {_type(method.returns, defined)}.", ""]
    return lines


def thrift_page() -> str:
    """The page's Markdown."""
    idl = parse(IDL_RESOURCE.read_text(encoding="utf-8"))
    defined = {d.name for d in idl.definitions}
    services = [d for d in idl.definitions if d.kind == "service"]
    structs = [d for d in idl.definitions if d.kind in ("struct", "exception")]
    enums = [d for d in idl.definitions if d.kind == "enum"]
    lines = [
        "<!-- Generated by docs/generate.py from the IDL (thrift/pinlater.thrift): edit "
        "the IDL, then run `python docs/generate.py`. -->",
        "",
        "# The Thrift API",
        "",
        "The PinLater service as pinledger serves it, from its IDL, `thrift/pinlater.thrift`",
        "(in an installed wheel, `pinledger/thrift/pinlater.thrift`): framed transport,",
        "binary protocol, port 9010 (`PINLEDGER_PORT`). Every name, field id, type and",
        "default of PinLater's is kept, so a client generated from PinLater's IDL works",
        "unchanged; what pinledger adds is marked *a pinledger addition*: new methods, new",
        "structs for them, and one optional field that old clients skip. Every method takes",
        "a `RequestContext` first and may throw a `PinLaterException`.",
        "",
        "How a client and a worker use them, and what pinledger does beyond PinLater on",
        "purpose: [Workers in any Thrift language](../guides/thrift-clients.md); the error",
        "codes for bad input: [decision 0003](../decisions/0003-error-codes.md).",
        "",
    ]
    for service in services:
        lines += [f"## The service {service.name}", "", *_service(service, defined)]
    lines += ["## Structs", ""]
    for struct in structs:
        lines += _struct(struct, defined)
    lines += ["## Enums", ""]
    for enum in enums:
        lines += [f"### {enum.name}", "", "| name | value |", "|---|---|"]
        lines += [f"| `{name}` | {value} |" for name, value in enum.values]
        lines.append("")
    lines += ["## Constants", "", "| name | type | value | notes |", "|---|---|---|---|"]
    for type_, name, value, doc in idl.constants:
        lines.append(f"| `{name}` | `{type_}` | `{value}` | {_text(doc)} |")
    return "\n".join(lines) + "\n"
