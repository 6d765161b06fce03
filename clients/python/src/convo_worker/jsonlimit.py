"""convo's one rule for the JSON it accepts, as the server (Go's
internal/jsonlimit), the Go and TypeScript runtimes and the SQL functions
(``convo._json_check``) apply it, with the same wording:

- every number fits a 64-bit float: no overflow to infinity (``1e400``),
  no non-zero value that rounds to zero (``1e-400``), and a literal of at
  most ``MAX_NUMBER_LEN`` characters (a Python int of 400 digits too);
- arrays and objects nest at most ``MAX_DEPTH`` levels;
- no string or key holds U+0000 or an unpaired UTF-16 surrogate.

It reads JSON text: ``json.loads`` turns ``1e400`` into ``inf`` and a
400-digit integer into an int PostgreSQL would store as it is, so a
model's tool-call arguments are checked as they streamed.
"""

from __future__ import annotations

import json
import math
import re

#: How many arrays and objects may enclose one another.
MAX_DEPTH = 64
#: The longest number literal, in characters.
MAX_NUMBER_LEN = 1000

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PLAIN = re.compile(r'[^"\\\x00-\x1f\ud800-\udfff]*')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class _Refused(Exception):
    pass


class _NotJSON(Exception):
    pass


def check(text: str) -> str | None:
    """The first value of text the rule refuses, as ``"<JSONPath>:
    <reason>"`` (``"$.expression: number 1e400 is outside the range of a
    64-bit float (magnitude between 5e-324 and 1.7e308, or 0)"``), or None
    when text follows the rule. Text that is not JSON at all is not this
    check's to refuse (``json.loads`` says what is wrong with it): None for
    it, unless a refused value came before the syntax error. One pass, no
    recursion, whatever the nesting."""
    try:
        _Scanner(text).run()
    except _Refused as refused:
        return str(refused)
    except _NotJSON:
        return None
    return None


class _Frame:
    __slots__ = ("array", "index", "key")

    def __init__(self, array: bool) -> None:
        self.array = array
        self.index = 0
        self.key: str | None = None


class _Scanner:
    def __init__(self, text: str) -> None:
        self.s = text
        self.pos = 0
        self.path: list[_Frame] = []

    def refuse(self, reason: str) -> None:
        raise _Refused(f"{self.path_string()}: {reason}")

    def path_string(self) -> str:
        out = "$"
        for f in self.path:
            if f.array:
                out += f"[{f.index}]"
                continue
            if f.key is None:  # the refused value is this key: the path is its object's
                break
            out += f".{f.key}" if _IDENT.match(f.key) else f"[{json.dumps(f.key, ensure_ascii=False)}]"
        return out

    def space(self) -> None:
        s, n = self.s, len(self.s)
        while self.pos < n and s[self.pos] in " \t\n\r":
            self.pos += 1

    def peek(self) -> str:
        return self.s[self.pos] if self.pos < len(self.s) else ""

    def run(self) -> None:
        # Iterative: a stack of frames instead of recursion.
        while True:
            self.space()
            c = self.peek()
            if c in ("[", "{") and c:
                if len(self.path) >= MAX_DEPTH:
                    self.refuse(f"nested deeper than {MAX_DEPTH} levels")
                self.pos += 1
                frame = _Frame(c == "[")
                self.path.append(frame)
                self.space()
                if self.peek() == ("]" if frame.array else "}"):
                    self.pos += 1
                    self.path.pop()
                    if self.next():
                        return
                    continue
                if not frame.array:
                    self.member()
                continue
            if c == '"':
                self.string()
            elif c == "-" or c.isdigit() and c.isascii():
                self.number()
            elif self.s.startswith("true", self.pos):
                self.pos += 4
            elif self.s.startswith("false", self.pos):
                self.pos += 5
            elif self.s.startswith("null", self.pos):
                self.pos += 4
            else:
                raise _NotJSON
            if self.next():
                return

    def member(self) -> None:
        f = self.path[-1]
        f.key = None
        self.space()
        if self.peek() != '"':
            raise _NotJSON
        f.key = self.string()
        self.space()
        if self.peek() != ":":
            raise _NotJSON
        self.pos += 1

    def next(self) -> bool:
        """After a value: steps over separators and closers. True when the
        whole text is read, False when another value follows."""
        while True:
            self.space()
            if not self.path:
                if self.pos != len(self.s):
                    raise _NotJSON
                return True
            f = self.path[-1]
            c = self.peek()
            if c == ",":
                self.pos += 1
                f.index += 1
                if not f.array:
                    self.member()
                return False
            if c != ("]" if f.array else "}"):
                raise _NotJSON
            self.pos += 1
            self.path.pop()

    def string(self) -> str:
        """Reads a string at its opening quote and returns its value."""
        s = self.s
        self.pos += 1
        out = []
        while True:
            m = _PLAIN.match(s, self.pos)
            out.append(m.group(0))
            self.pos = m.end()
            if self.pos >= len(s):
                raise _NotJSON
            c = s[self.pos]
            if c == '"':
                self.pos += 1
                return "".join(out)
            if c == "\\":
                out.append(self.escape())
            elif "\ud800" <= c <= "\udfff":
                # A surrogate in the text itself (decoded from escapes
                # split across chunks): never half of a pair in a str.
                self.refuse(f"a string holds an unpaired surrogate \\u{ord(c):04x}")
            else:
                raise _NotJSON  # a control character

    def hex4(self, at: int) -> int | None:
        h = self.s[at:at + 4]
        if len(h) != 4 or not all(ch in "0123456789abcdefABCDEF" for ch in h):
            return None
        return int(h, 16)

    def escape(self) -> str:
        e = self.s[self.pos + 1:self.pos + 2]
        if e in _ESCAPES:
            self.pos += 2
            return _ESCAPES[e]
        if e != "u":
            raise _NotJSON
        r = self.hex4(self.pos + 2)
        if r is None:
            raise _NotJSON
        self.pos += 6
        if r == 0:
            self.refuse("a string holds \\u0000, which PostgreSQL cannot store")
        if 0xD800 <= r <= 0xDBFF:
            if self.s.startswith("\\u", self.pos):
                lo = self.hex4(self.pos + 2)
                if lo is not None and 0xDC00 <= lo <= 0xDFFF:
                    self.pos += 6
                    return chr(0x10000 + ((r - 0xD800) << 10) + (lo - 0xDC00))
            self.refuse(f"a string holds an unpaired surrogate \\u{r:04x}")
        if 0xDC00 <= r <= 0xDFFF:
            self.refuse(f"a string holds an unpaired surrogate \\u{r:04x}")
        return chr(r)

    def number(self) -> None:
        m = _NUMBER.match(self.s, self.pos)
        if m is None or m.end() == self.pos:
            raise _NotJSON
        lit = m.group(0)
        self.pos = m.end()
        if len(lit) > MAX_NUMBER_LEN:
            self.refuse(f"a number of {len(lit)} characters (at most {MAX_NUMBER_LEN})")
        if len(lit) <= 15 and "e" not in lit and "E" not in lit:
            return  # short, no exponent: in range
        f = float(lit)
        mantissa = re.split(r"[eE]", lit.lstrip("-"))[0]
        if math.isinf(f) or f == 0 and mantissa.strip("0.") != "":
            shown = lit if len(lit) <= 32 else lit[:32] + "…"
            self.refuse(f"number {shown} is outside the range of a 64-bit float (magnitude between 5e-324 and 1.7e308, or 0)")
