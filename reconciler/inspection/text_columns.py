"""CSV fields and JSON values of a whole Arrow column at once, for ``reconcile sql``'s
exports.

An export renders every row, and rendering value by value in Python cost about 26 µs a
row of six columns: a million rows took half a minute. The common types are rendered
here by Arrow's compute kernels a column at a time, to exactly the text the value by
value rendering gives (``sql.csv_cells`` and ``sql.json_texts``, which
``tests/test_sql_text_columns.py`` holds this module to); every other type, and values
outside what the kernels render the same way (years before 1000 or after 9999, time
zones other than UTC, decimals Arrow would write with an exponent, strings JSON must
escape), still go value by value through ``fallback``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

_MICROS = 1_000_000
_FIRST_MICROS = (dt.datetime(1000, 1, 1) - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
_END_MICROS = (dt.datetime.max - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
_FIRST_DAY = (dt.date(1000, 1, 1) - dt.date(1970, 1, 1)).days
_END_DAY = (dt.date(9999, 12, 31) - dt.date(1970, 1, 1)).days
_SPECIAL = '[",\r\n]'
_JSON_ESCAPED = '[\\x00-\\x1f"\\\\]'
"""What ``json.dumps`` escapes in a string besides non-ASCII, which it keeps as it is
(``ensure_ascii=False``): control characters, the quote and the backslash."""


def csv_fields(column: pa.Array, fallback: Callable[[pa.Array], list[str]]) -> pa.Array:
    """``column``'s values as CSV fields (a string array without nulls): NULL an empty
    field, an empty string ``""``, a field quoted where it holds a comma, a quote or a
    line break. ``fallback`` renders a column the kernels do not, value by value."""
    type_ = column.type
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return pc.fill_null(_quoted(column.cast(pa.string())), "")
    text = _kernel_text(column)
    if text is None:
        return pa.array(fallback(column), pa.string())
    return pc.fill_null(text, "")  # these texts are never empty: "" is NULL alone


def csv_lines(columns: list[pa.Array]) -> str:
    """Rows of CSV fields (``csv_fields``) joined into lines, each ending in ``\\n``."""
    lines = pc.binary_join_element_wise(*columns, ",")
    return "".join(line + "\n" for line in lines.to_pylist())


def json_values(column: pa.Array, fallback: Callable[[pa.Array], list[str]]) -> pa.Array:
    """``column``'s values as JSON texts (a string array without nulls): ``null``,
    numbers and booleans as themselves, strings quoted, and decimals, dates and times as
    the strings of their text. ``fallback`` renders a column the kernels do not, value by
    value."""
    type_ = column.type
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        text = column.cast(pa.string())
        if pc.any(pc.match_substring_regex(text, _JSON_ESCAPED)).as_py():
            return pa.array(fallback(column), pa.string())
        return pc.fill_null(_in_quotes(text), "null")
    text = _kernel_text(column)
    if text is None:
        return pa.array(fallback(column), pa.string())
    plain = pa.types.is_integer(type_) or pa.types.is_boolean(type_)
    return pc.fill_null(text if plain else _in_quotes(text), "null")


def json_lines(names: list[str], columns: list[pa.Array]) -> str:
    """Rows of JSON values (``json_values``) as objects keyed by ``names``, in order,
    one a line."""
    pieces: list[pa.Array | str] = []
    for index, (name, values) in enumerate(zip(names, columns, strict=True)):
        pieces += [
            ("{" if index == 0 else ",") + json.dumps(name, ensure_ascii=False) + ":",
            values,
        ]
    lines = pc.binary_join_element_wise(*pieces, "}\n", "")
    return "".join(lines.to_pylist())


def _in_quotes(text: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise('"', text, '"', "")


def _quoted(text: pa.Array) -> pa.Array:
    must = pc.or_(pc.equal(text, ""), pc.match_substring_regex(text, _SPECIAL))
    doubled = pc.replace_substring(text, '"', '""')
    return pc.if_else(must, _in_quotes(doubled), text)


def _kernel_text(column: pa.Array) -> pa.Array | None:
    """The kernels' text for a column they render as the value by value path does, or
    None."""
    type_ = column.type
    if pa.types.is_integer(type_):
        return column.cast(pa.string())
    if pa.types.is_decimal(type_):  # keeps the scale; but 1E-10 where the digits are few
        text = column.cast(pa.string())
        return None if pc.any(pc.match_substring(text, "E")).as_py() else text
    if pa.types.is_boolean(type_):
        return pc.if_else(column, "true", "false")
    if pa.types.is_date32(type_) and _within(column.cast(pa.int32()), _FIRST_DAY, _END_DAY):
        return column.cast(pa.string())
    if pa.types.is_timestamp(type_) and type_.unit == "us" and type_.tz in (None, "UTC"):
        micros = column.cast(pa.int64())
        if _within(micros, _FIRST_MICROS, _END_MICROS):
            return _timestamp_text(column, micros, zoned=type_.tz is not None)
    return None


def _within(values: pa.Array, first: int, last: int) -> bool:
    low, high = pc.min_max(values).values()
    return low.as_py() is None or (low.as_py() >= first and high.as_py() <= last)


def _timestamp_text(column: pa.Array, micros: pa.Array, zoned: bool) -> pa.Array:
    """RFC 3339 with 0, 3 or 6 fractional digits, as few as keep the value exact, and
    ``Z`` when the column has a zone (``Timestamp.isoformat``)."""
    seconds = pc.floor_temporal(column, unit="second")
    # UTC (or no zone): the value's own fields. A cast, as strftime takes 20 times as long.
    plain = seconds.cast(pa.timestamp("s")).cast(pa.string())  # "2026-01-01 06:00:00"
    whole = pc.replace_substring(plain, " ", "T", max_replacements=1)
    fraction = pc.subtract(micros, seconds.cast(pa.int64()))
    in_millis = pc.equal(pc.subtract(fraction, pc.multiply(pc.divide(fraction, 1000), 1000)), 0)
    three = pc.utf8_lpad(pc.divide(fraction, 1000).cast(pa.string()), 3, "0")
    six = pc.utf8_lpad(fraction.cast(pa.string()), 6, "0")
    digits = pc.if_else(in_millis, three, six)
    dotted = pc.if_else(pc.equal(fraction, 0), "", pc.binary_join_element_wise(".", digits, ""))
    return pc.binary_join_element_wise(whole, dotted, "Z" if zoned else "", "")
