"""Reading instants: ISO 8601, Unix seconds, and the dates people write ("8 May, 2023").

`parse_instant` reads ISO 8601 only (what OKF and metadata filters accept); `parse_when` reads
anything a memory or a document may carry as its date: a `datetime` or `date`, Unix seconds, an
ISO 8601 text, or a written date with an optional time before it (``1:56 pm on 8 May, 2023``,
``May 8, 2023``, ``8 May 2023``), or a year or a month alone (``2023``, ``2023-05``, ``May
2023``). Both return an aware UTC `datetime`; a time without an offset is taken as UTC, a date
alone as its midnight UTC, a year or a month as its first midnight. `parse_span` also gives the
last instant of a day, month or year, for an ``until`` that includes it.
"""

from __future__ import annotations

import datetime as dt
import math
import re

ISO_INSTANT = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})"
    r"(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(Z|z|[+-]\d{2}:?\d{2})?)?$"
)
"""An ISO 8601 date or datetime: year, month, day, hour, minute, second, fraction, offset."""
_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_TIME = r"(?:(\d{1,2})(?::(\d{2}))?\s*([ap])\.?m\.?\s*(?:on\s+|,\s*)?)?"
_DAY_MONTH = re.compile(
    rf"^{_TIME}(\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH},?\s+(\d{{4}})$", re.IGNORECASE
)
_MONTH_DAY = re.compile(
    rf"^{_TIME}{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})$", re.IGNORECASE
)

_ISO_PERIOD = re.compile(r"^(\d{4})(?:-(\d{2}))?$")
_WRITTEN_MONTH = re.compile(rf"^{_MONTH},?\s+(\d{{4}})$", re.IGNORECASE)
_TICK = dt.timedelta(microseconds=1)
"""The last instant of a span is one tick before the next span's first."""


def parse_instant(value: object) -> dt.datetime | None:
    """Return an ISO 8601 date or datetime as an aware UTC datetime, or None if it is not one.

    A date alone is its midnight UTC; a datetime without an offset is taken as UTC.
    """
    if not isinstance(value, str):
        return None
    match = ISO_INSTANT.match(value.strip())
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    try:
        instant = dt.datetime(
            int(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            int((fraction or "0")[:6].ljust(6, "0")),
            tzinfo=_offset(offset),
        )
    except ValueError:  # a 13th month, a 25th hour, an offset of a day or more
        return None
    return instant.astimezone(dt.timezone.utc)


def parse_when(value: object) -> dt.datetime | None:
    """Return the instant ``value`` names as an aware UTC datetime, or None if it names none.

    ``value``: a `datetime` (naive: UTC), a `date` (its midnight UTC), Unix seconds (a finite
    int or float, not a bool), or a text: ISO 8601, a written date with an optional 12-hour
    time before it, or a month or a year (see the module docstring). A day, month or year is
    its first instant (`parse_span` gives its last too).
    """
    span = parse_span(value)
    return None if span is None else span[0]


def parse_span(value: object) -> tuple[dt.datetime, dt.datetime] | None:
    """Return the first and the last instant ``value`` names (as `parse_when` reads it), or None.

    A day, a month or a year written without a time covers all of it: ``2023-05-08`` from its
    midnight to the last microsecond before the next, ``May 2023`` the month, ``2023`` the
    year. An instant (a time, a `datetime`, Unix seconds) is both ends. ``until="2023"`` thus
    keeps what happened in 2023, as a person means it.
    """
    if isinstance(value, dt.datetime) or not isinstance(value, dt.date | str):
        instant = _instant(value)
        return None if instant is None else (instant, instant)
    if isinstance(value, dt.date):
        start = dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc)
        return start, _next(start, "day") - _TICK
    text = " ".join(value.split())
    parsed = _text_start(text)
    if parsed is None:
        return None
    start, unit = parsed
    if unit is None:
        return start, start
    try:
        return start, _next(start, unit) - _TICK
    except (OverflowError, ValueError):  # the year 9999 ends where datetime does
        return start, dt.datetime.max.replace(tzinfo=dt.timezone.utc)


def _instant(value: object) -> dt.datetime | None:
    """Return a `datetime` (naive: UTC) or Unix seconds as an aware UTC datetime, or None."""
    if isinstance(value, dt.datetime):
        zoned = value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)
        return zoned.astimezone(dt.timezone.utc)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value):
        return None
    try:
        return dt.datetime.fromtimestamp(value, dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


def _text_start(text: str) -> tuple[dt.datetime, str | None] | None:
    """Return a text's first instant and the span it names (``day``, ``month``, ``year``; None
    for an instant), or None if it names none."""
    iso = ISO_INSTANT.match(text)
    if iso is not None:
        instant = parse_instant(text)
        return None if instant is None else (instant, None if iso.group(4) else "day")
    written = _written(text)
    if written is not None:
        return written
    return _period(text)


def _next(start: dt.datetime, unit: str) -> dt.datetime:
    """Return the first instant after the ``unit`` (day, month, year) that begins at ``start``."""
    if unit == "day":
        return start + dt.timedelta(days=1)
    if unit == "month":
        return start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
    return start.replace(year=start.year + 1)


def _period(text: str) -> tuple[dt.datetime, str] | None:
    """Return the first instant of a year or a month written alone (``2023``, ``2023-05``,
    ``May 2023``) and its unit, or None."""
    match = _ISO_PERIOD.match(text)
    if match is not None:
        year, month = int(match.group(1)), int(match.group(2) or 1)
        unit = "year" if match.group(2) is None else "month"
    else:
        written = _WRITTEN_MONTH.match(text)
        if written is None:
            return None
        year, month, unit = int(written.group(2)), _MONTHS[written.group(1).lower()], "month"
    if not 1 <= month <= 12 or year < 1:
        return None
    return dt.datetime(year, month, 1, tzinfo=dt.timezone.utc), unit


def _written(text: str) -> tuple[dt.datetime, str | None] | None:
    """Return the first instant of a written date (``[1:56 pm on] 8 May, 2023``) and ``day``
    when it has no time (None when it has), or None."""
    match = _DAY_MONTH.match(text)
    if match is not None:
        hour, minute, half, day, month, year = match.groups()
    else:
        match = _MONTH_DAY.match(text)
        if match is None:
            return None
        hour, minute, half, month, day, year = match.groups()
    hours = 0
    if hour is not None:
        hours = int(hour)
        if not 1 <= hours <= 12:
            return None
        hours = hours % 12 + (12 if half.lower() == "p" else 0)
    try:
        start = dt.datetime(
            int(year),
            _MONTHS[month.lower()],
            int(day),
            hours,
            int(minute or 0),
            tzinfo=dt.timezone.utc,
        )
    except ValueError:  # the 31st of a 30-day month
        return None
    return start, None if hour is not None else "day"


def _offset(text: str | None) -> dt.timezone:
    if text is None or text in ("Z", "z"):
        return dt.timezone.utc
    digits = text[1:].replace(":", "")
    delta = dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    return dt.timezone(-delta if text[0] == "-" else delta)
