"""The pinned Param.h as struct layouts, to check tpuc's declarations against.

A struct 4 bytes short is accepted by the vendor library without a word and
yields plausible but wrong commands, so every ctypes declaration of
`tpuc.target.vendor.params` is compared, field by field (name, offset) and in size,
with the header that ships with the library, when the driver starts.
pycparser reads the header after a small preprocessing step (the header uses
only `#define NAME <number>` macros, `#pragma once` and an `extern "C"`
guard); the layout follows the x86-64 System V rules the library was built with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pycparser import c_ast, c_parser

from tpuc.base.errors import TpucError

_PRELUDE = """
typedef signed char int8_t; typedef unsigned char uint8_t;
typedef short int16_t; typedef unsigned short uint16_t;
typedef int int32_t; typedef unsigned int uint32_t;
typedef long int64_t; typedef unsigned long uint64_t;
typedef _Bool bool; typedef struct _IO_FILE FILE;
"""
_SCALARS = {  # (size, alignment) of the C scalar types the header uses
    "char": 1,
    "signed char": 1,
    "unsigned char": 1,
    "_Bool": 1,
    "short": 2,
    "unsigned short": 2,
    "int": 4,
    "unsigned int": 4,
    "unsigned": 4,
    "float": 4,
    "long": 8,
    "unsigned long": 8,
    "long long": 8,
    "unsigned long long": 8,
    "double": 8,
}
_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)\s+\(?(-?\d+)\)?\s*$")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


@dataclass(frozen=True)
class Layout:
    """One struct as the C compiler lays it out."""

    size: int
    align: int
    fields: tuple[tuple[str, int], ...]  # (name, offset) in declaration order


def _preprocess(text: str) -> str:
    """The header as plain C: numeric macros substituted, directives and the
    C++ guard removed, and C++-only parts (after `#ifdef __cplusplus` blocks
    that hold declarations) dropped."""
    text = _COMMENTS.sub("", text)
    macros: dict[str, str] = {}
    lines = []
    skipping = 0
    for line in text.splitlines():
        stripped = line.strip()
        match = _DEFINE.match(line)
        if match:
            macros[match[1]] = match[2]
        if stripped.startswith("#"):
            if stripped.startswith("#ifdef __cplusplus"):
                skipping = 1
            elif skipping and stripped.startswith("#endif"):
                skipping = 0
            continue
        if skipping or stripped.startswith('extern "C"'):
            continue
        lines.append(line)
    body = "\n".join(lines)
    for name, value in macros.items():
        body = re.sub(rf"\b{name}\b", value, body)
    return _PRELUDE + body


class _Layouts:
    """Struct layouts of a parsed header, computed on demand by typedef name."""

    def __init__(self, ast: c_ast.FileAST):
        self.typedefs: dict[str, c_ast.Node] = {}
        self.tagged: dict[str, c_ast.Struct] = {}
        for node in ast.ext:
            if isinstance(node, c_ast.Typedef):
                self.typedefs[node.name] = node.type
            decl_type = getattr(node, "type", None)
            for candidate in (decl_type, getattr(decl_type, "type", None)):
                if isinstance(candidate, c_ast.Struct) and candidate.name and candidate.decls:
                    self.tagged[candidate.name] = candidate

    def of_type(self, node: c_ast.Node) -> tuple[int, int]:
        """(size, alignment) of a declarator type."""
        if isinstance(node, c_ast.PtrDecl):
            return 8, 8
        if isinstance(node, c_ast.ArrayDecl):
            size, align = self.of_type(node.type)
            return size * int(node.dim.value), align
        inner = node.type if isinstance(node, c_ast.TypeDecl) else node
        if isinstance(inner, c_ast.IdentifierType):
            name = " ".join(inner.names)
            if name in _SCALARS:
                return _SCALARS[name], _SCALARS[name]
            return self.of_type(self.typedefs[name])
        if isinstance(inner, c_ast.Enum):
            return 4, 4
        if isinstance(inner, c_ast.Struct):
            layout = self.struct(inner)
            return layout.size, layout.align
        raise TpucError(f"Param.h: cannot lay out {type(inner).__name__}")

    def struct(self, node: c_ast.Struct) -> Layout:
        if not node.decls:
            node = self.tagged[node.name]
        offset, align, fields = 0, 1, []
        for decl in node.decls:
            size, field_align = self.of_type(decl.type)
            offset += -offset % field_align
            fields.append((decl.name, offset))
            offset += size
            align = max(align, field_align)
        offset += -offset % align
        return Layout(offset, align, tuple(fields))

    def layout(self, typedef: str) -> Layout:
        node = self.typedefs.get(typedef)
        inner = node.type if isinstance(node, c_ast.TypeDecl) else None
        if not isinstance(inner, c_ast.Struct):
            raise TpucError(f"Param.h declares no struct '{typedef}'")
        return self.struct(inner)


@cache
def header_layouts(path: Path) -> _Layouts:
    """The struct layouts of the header at `path` (parsed once per process)."""
    try:
        text = Path(path).read_text()
        ast = c_parser.CParser().parse(_preprocess(text), filename=str(path))
    except (OSError, c_parser.ParseError) as exc:
        raise TpucError(f"{path}: cannot read the vendor header ({exc})") from exc
    return _Layouts(ast)


__all__ = ["Layout", "header_layouts"]
