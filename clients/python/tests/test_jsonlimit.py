"""convo's rule for accepted JSON (convo_worker.jsonlimit): the same cases
as Go's internal/jsonlimit TestCheck and the TypeScript runtime's, with the
same wording. No database."""

from __future__ import annotations

import time

import pytest

from convo_worker import jsonlimit

RANGE = "is outside the range of a 64-bit float (magnitude between 5e-324 and 1.7e308, or 0)"
DEEP = "[" * 65 + "]" * 65


@pytest.mark.parametrize("text,want", [
    ('{"a":[1,2.5,-3e10,1.7e308,5e-324,0,-0,0.0e-999999]}', None),
    ("[" * 64 + "]" * 64, None),
    ('"\\ud83d\\ude00 \\u00e9"', None),
    (" true ", None),
    ('{"s": "\U0001f600 é"}', None),
    ('{"expression": 1e400}', f"$.expression: number 1e400 {RANGE}"),
    ("[1, -1e999999]", f"$[1]: number -1e999999 {RANGE}"),
    ("[1e-400]", f"$[0]: number 1e-400 {RANGE}"),
    ("[" + "1" * 400 + "]", f"$[0]: number {'1' * 32}… {RANGE}"),
    ('{"odd key":{"n":[0,' + "1" * 1001 + "]}}", '$["odd key"].n[1]: a number of 1001 characters (at most 1000)'),
    (DEEP, "$" + "[0]" * 64 + ": nested deeper than 64 levels"),
    ('{"a":"x\\u0000"}', "$.a: a string holds \\u0000, which PostgreSQL cannot store"),
    ('{"\\u0000":1}', "$: a string holds \\u0000, which PostgreSQL cannot store"),
    ('["\\ud800"]', "$[0]: a string holds an unpaired surrogate \\ud800"),
    ('["\\udc00\\ud800"]', "$[0]: a string holds an unpaired surrogate \\udc00"),
    ('["\ud800"]', "$[0]: a string holds an unpaired surrogate \\ud800"),
    # Not JSON: json.loads says why, not this check.
    ('{"a": 1', None),
    ("[1e400", f"$[0]: number 1e400 {RANGE}"),
    ("nope", None),
])
def test_check(text: str, want: str | None) -> None:
    assert jsonlimit.check(text) == want


def test_deep_text_needs_no_recursion() -> None:
    assert jsonlimit.check("[" * 100_000) == "$" + "[0]" * 64 + ": nested deeper than 64 levels"


def test_is_linear() -> None:
    # About 1 s of CPU a megabyte of small numbers (0.4 s of ordinary
    # JSON): a model's arguments are some kilobytes. Loose bound.
    start = time.process_time()
    assert jsonlimit.check("[" + "1," * 100_000 + "1e999999]") == f"$[100000]: number 1e999999 {RANGE}"
    assert jsonlimit.check("[" + "1e999999," * 100_000 + "1]") == f"$[0]: number 1e999999 {RANGE}"
    assert time.process_time() - start < 5
