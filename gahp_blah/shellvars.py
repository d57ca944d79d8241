"""Read the assignments of a shell-style file (``blah.config``) without running it.

The C blahp sources ``blah.config`` with ``/bin/sh`` and reads back ``set``; this module
reads the same assignments as text, so nothing in the file is ever executed:

* ``NAME=value``, ``NAME[i]=value`` (an array element), ``NAME=(a b c)`` (an array), several
  on a line, ``;`` between commands, ``export``/``declare``/``typeset``/``readonly`` before
  them (``export``, and ``-x`` of the others, mark the name exported);
* quoting as the shell reads it: ``'literal'``, ``"with $expansion"``, backslashes, a
  backslash-newline joins lines, ``#`` starts a comment at the start of a word;
* ``$NAME``, ``${NAME}``, ``${NAME:-word}`` and ``${NAME-word}`` expand from the assignments
  read before, then the environment; ``~`` at the start of a value is ``$HOME``;
* command substitution (``$(...)``, backticks, ``$((...))``) and other ``${...}`` forms are
  kept as literal text, with a note; a line that is not an assignment (``source``, ``if``,
  a pipe, a function) is skipped, with a note.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import attrs

from gahp_blah.errors import BlahError

__all__ = ["Assignment", "ShellFile", "parse_assignments"]

_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[([^\]\s]*)\])?=")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DECLARE = {"export", "declare", "typeset", "readonly"}
_SPECIAL = set("|&<>")
_VALUE_END = {"", " ", "\t", "\r", "\n", ";", ")", *_SPECIAL}
"""What ends an unquoted value ("": the end of the text)."""
_TILDE_END = ("/", "", " ", "\n", ";", ":")
"""What may follow a ``~`` that stands for ``$HOME``."""
_BRACED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)(.*))?", re.S)
MAX_WORDS = 10_000
_NOT_AN_ASSIGNMENT = "not an assignment: skipped (blah.config is read, never run)"


@attrs.frozen
class Assignment:
    """One name's value as the file leaves it."""

    name: str
    value: str | tuple[str, ...]
    """A string, or an array's elements (index order)."""
    path: str
    line: int
    raw: str
    """The line as written (stripped)."""
    exported: bool = False


@attrs.define
class ShellFile:
    """What :func:`parse_assignments` read: the assignments and notes on what it skipped."""

    values: dict[str, Assignment] = attrs.field(factory=dict)
    notes: list[str] = attrs.field(factory=list)
    exported: set[str] = attrs.field(factory=set)
    """Names marked exported (``export NAME`` may come before the assignment)."""


class _Skip(BlahError):
    """The command being read is not made only of assignments."""


_Word = tuple[str, str | None, str | tuple[str, ...] | None]
"""(name, index, value) of an assignment word (index "" for a plain one), or (text, None,
None) for any other word."""


def _declaration(words: list[_Word]) -> tuple[list[_Word], bool] | None:
    """A command that starts with ``export``, ``declare``, ``typeset`` or ``readonly``: its
    other words (options left out) and whether it exports them; None for any other command."""
    first, index, _ = words[0]
    if first not in _DECLARE or index is not None:
        return None
    options = [text for text, i, _ in words[1:] if i is None and text.startswith("-")]
    rest = [(text, i, v) for text, i, v in words[1:] if not (i is None and text.startswith("-"))]
    # declare/typeset/readonly -x (or -rx ...) export as export does
    marks_export = any(o.startswith("-") and not o.startswith("--") and "x" in o for o in options)
    return rest, first == "export" or marks_export


class _Scanner:
    def __init__(
        self, text: str, path: str, lookup: Callable[[str], str | None], out: ShellFile
    ) -> None:
        self.s = text
        self.i = 0
        self.line = 1
        self.path = path
        self.lookup = lookup
        self.out = out
        self.lines = text.split("\n")
        self.readers: dict[str, Callable[[], str]] = {
            "\\": self.backslash,
            "'": self.single_quoted,
            '"': self.double_quoted,
            "$": self.dollar,
            "`": self.backquoted,
        }
        """What an unquoted value's character starts, read after the character."""

    # -- characters --------------------------------------------------------------------------
    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def take(self) -> str:
        c = self.s[self.i]
        self.i += 1
        if c == "\n":
            self.line += 1
        return c

    def note(self, line: int, what: str) -> None:
        self.out.notes.append(f"{self.path}, line {line}: {what}")

    # -- commands ----------------------------------------------------------------------------
    def run(self) -> None:
        while self.i < len(self.s):
            self.command()

    def skip_blanks(self) -> None:
        while True:
            c = self.peek()
            if c in (" ", "\t", "\r"):
                self.take()
            elif c == "\\" and self.peek(1) == "\n":
                self.take()
                self.take()
            else:
                return

    def skip_to_end_of_line(self) -> None:
        while self.i < len(self.s) and self.peek() != "\n":
            self.take()

    def command(self) -> None:
        start = self.line
        try:
            words = self.words()
        except _Skip:
            self.skip_command()
            self.note(start, _NOT_AN_ASSIGNMENT)
            return
        self.apply(words, start)

    def words(self) -> list[_Word]:
        """The words of one command, up to its end (a newline, ``;``, the end of the text)."""
        words: list[_Word] = []
        while True:
            self.skip_blanks()
            c = self.peek()
            if c in ("", "\n", ";"):
                if c:
                    self.take()
                return words
            if c == "#":
                self.skip_to_end_of_line()
                continue
            if c in _SPECIAL or c in "()":
                raise _Skip(c)
            words.append(self.word())
            if len(words) > MAX_WORDS:
                raise _Skip("too many words")

    def skip_command(self) -> None:
        """Skip to the end of the line, past quotes (as well as a quote can be matched)."""
        while self.i < len(self.s):
            c = self.take()
            if c == "\n":
                return
            if c == "\\" and self.i < len(self.s):
                self.take()
            elif c in "'\"":
                self.skip_quoted(c)

    def skip_quoted(self, quote: str) -> None:
        """Past the closing ``quote`` (inside ``"..."`` a backslash escapes what follows)."""
        while self.i < len(self.s) and self.peek() != quote:
            if quote == '"' and self.peek() == "\\":
                self.take()
            if self.i < len(self.s):
                self.take()
        if self.i < len(self.s):
            self.take()

    def apply(self, words: list[_Word], line: int) -> None:
        if not words:
            return
        declared = _declaration(words)
        if declared is None and any(index is None for _, index, _ in words):
            self.note(line, _NOT_AN_ASSIGNMENT)
            return
        words, exported = declared or (words, False)
        self.assign_words(words, exported, line)

    def assign_words(self, words: list[_Word], exported: bool, line: int) -> None:
        """Each ``NAME=value`` of ``words``; a plain ``NAME`` (``export NAME``) is marked
        exported."""
        raw = self.lines[line - 1].strip() if line <= len(self.lines) else ""
        for text, index, value in words:
            if index is None:
                if exported and _NAME.fullmatch(text):
                    self.mark_exported(text)
            else:
                assert value is not None  # an assignment word always has a value
                self.assign(text, index, value, exported, line, raw)

    def mark_exported(self, name: str) -> None:
        self.out.exported.add(name)
        if name in self.out.values:
            self.out.values[name] = attrs.evolve(self.out.values[name], exported=True)

    def assign(
        self,
        name: str,
        index: str,
        value: str | tuple[str, ...],
        exported: bool,
        line: int,
        raw: str,
    ) -> None:
        """``name=value``, or ``name[index]=value`` (an element of an array)."""
        old = self.out.values.get(name)
        if exported:
            self.out.exported.add(name)
        if index != "" and isinstance(value, str):  # NAME[i]=value
            before = old.value if old is not None else ""
            elements = dict(enumerate(before)) if isinstance(before, tuple) else {}
            try:
                elements[int(index)] = value
            except ValueError:
                self.note(line, f"array index {index!r} of {name} is not a number: skipped")
                return
            value = tuple(elements[k] for k in sorted(elements))
        keep_exported = name in self.out.exported
        self.out.values[name] = _entry(name, value, self.path, line, raw, keep_exported)

    # -- words -------------------------------------------------------------------------------
    def word(self) -> _Word:
        """(name, index, value) for an assignment (index "" for a plain one), or
        (text, None, None) for any other word."""
        m = _ASSIGN.match(self.s, self.i)
        if m is None:
            return (self.value(), None, None)
        self.i = m.end()
        name, index = m.group(1), m.group(2) or ""
        if self.peek() == "(" and not index:
            self.take()
            return (name, "", self.array())
        return (name, index, self.value(tilde=True))

    def array(self) -> tuple[str, ...]:
        items: list[str] = []
        while True:
            while self.peek() in (" ", "\t", "\r", "\n"):
                self.take()
            c = self.peek()
            if c == "":
                raise _Skip("unclosed array")
            if c == ")":
                self.take()
                return tuple(items)
            if c == "#":
                self.skip_to_end_of_line()
                continue
            if c in _SPECIAL or c in "(;":
                raise _Skip(c)
            m = re.compile(r"\[[^\]]*\]=").match(self.s, self.i)
            if m:
                self.i = m.end()
            items.append(self.value())

    def value(self, tilde: bool = False) -> str:
        parts: list[str] = []
        if tilde and self.peek() == "~" and self.peek(1) in _TILDE_END:
            self.take()
            parts.append(self.lookup("HOME") or "~")
        while (c := self.peek()) not in _VALUE_END:
            if c == "(":
                raise _Skip(c)
            self.take()
            read = self.readers.get(c)
            parts.append(read() if read is not None else c)
        return "".join(parts)

    def backslash(self) -> str:
        """After an unquoted backslash: the next character (a newline joins lines)."""
        nxt = self.peek()
        if nxt == "\n":
            self.take()
            return ""
        return self.take() if nxt else ""

    def single_quoted(self) -> str:
        return self.until("'")

    def backquoted(self) -> str:
        """After a backtick: the command substitution, kept as text."""
        line = self.line
        text = "`" + self.until("`") + "`"
        self.note(line, "command substitution `...` kept as text, not run")
        return text

    def until(self, close: str) -> str:
        start = self.i
        end = self.s.find(close, self.i)
        if end < 0:
            raise _Skip("unclosed quote")
        while self.i <= end:
            self.take()
        return self.s[start:end]

    def double_quoted(self) -> str:
        parts: list[str] = []
        while True:
            c = self.peek()
            if c == "":
                raise _Skip("unclosed quote")
            self.take()
            if c == '"':
                return "".join(parts)
            if c == "\\" and self.peek() in ('"', "\\", "$", "`", "\n"):
                nxt = self.take()
                if nxt != "\n":
                    parts.append(nxt)
            elif c == "$":
                parts.append(self.dollar())
            elif c == "`":
                parts.append(self.backquoted())
            else:
                parts.append(c)

    def dollar(self) -> str:
        """After a ``$``: the expansion, or the literal text when it is not expanded."""
        line = self.line
        m = _NAME.match(self.s, self.i)
        if m:
            self.i = m.end()
            return self.expand(m.group())
        c = self.peek()
        if c == "(":
            text = self.balanced("(", ")")
            self.note(line, f"command substitution ${text} kept as text, not run")
            return "$" + text
        if c == "{":
            return self.braced(line)
        if c and (c.isdigit() or c in "$?!#@*-"):
            self.take()
            self.note(line, f"${c} kept as text (not expanded)")
            return "$" + c
        return "$"

    def braced(self, line: int) -> str:
        """``${NAME}``, ``${NAME:-word}`` or ``${NAME-word}`` expanded; another ``${...}``
        kept as text."""
        text = self.balanced("{", "}")
        inner = text[1:-1]
        m = _BRACED.fullmatch(inner)
        if m is None or "$(" in inner or "`" in inner:
            self.note(line, f"${text} kept as text (not expanded)")
            return "$" + text
        name, op, default = m.groups()
        value = self.expand(name)
        if op == ":-" and not value or op == "-" and self.known(name) is None:
            return default or ""
        return value

    def balanced(self, open_: str, close: str) -> str:
        depth = 0
        start = self.i
        while self.i < len(self.s):
            c = self.take()
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    return self.s[start : self.i]
            elif c == "\\" and self.i < len(self.s):
                self.take()
        raise _Skip("unclosed " + open_)

    def known(self, name: str) -> str | None:
        entry = self.out.values.get(name)
        if entry is not None:
            v = entry.value
            return v if isinstance(v, str) else (v[0] if v else "")
        return self.lookup(name)

    def expand(self, name: str) -> str:
        return self.known(name) or ""


def _entry(
    name: str, value: str | tuple[str, ...], path: str, line: int, raw: str, exported: bool
) -> Assignment:
    return Assignment(name, value, path, line, raw, exported)


def parse_assignments(
    text: str,
    path: str,
    environ: Mapping[str, str],
    into: ShellFile | None = None,
) -> ShellFile:
    """The assignments of ``text`` (read from ``path``) added to ``into`` (a new
    :class:`ShellFile` by default): later files see, and override, earlier ones' values."""
    out = into if into is not None else ShellFile()
    _Scanner(text, path, environ.get, out).run()
    return out
