"""Reading instants (`vrom.dates`): ISO 8601, Unix seconds, and dates as people write them."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vrom.dates import parse_instant, parse_span, parse_when

UTC = dt.timezone.utc


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2023-05-08", dt.datetime(2023, 5, 8, tzinfo=UTC)),
        ("2023-05-08T13:56:00Z", dt.datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("2023-05-08T15:56:00+02:00", dt.datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("1:56 pm on 8 May, 2023", dt.datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("10:37 am on 27 June, 2023", dt.datetime(2023, 6, 27, 10, 37, tzinfo=UTC)),
        ("12:09 am on 13 September, 2023", dt.datetime(2023, 9, 13, 0, 9, tzinfo=UTC)),
        ("12:30 pm on 1 Jan, 2024", dt.datetime(2024, 1, 1, 12, 30, tzinfo=UTC)),
        ("8 May 2023", dt.datetime(2023, 5, 8, tzinfo=UTC)),
        ("8th May, 2023", dt.datetime(2023, 5, 8, tzinfo=UTC)),
        ("May 8, 2023", dt.datetime(2023, 5, 8, tzinfo=UTC)),
        ("Sept. 3, 2022", dt.datetime(2022, 9, 3, tzinfo=UTC)),
        ("  7  pm,  3   March  2021 ", dt.datetime(2021, 3, 3, 19, tzinfo=UTC)),
        ("2023", dt.datetime(2023, 1, 1, tzinfo=UTC)),  # a year or a month: its first midnight
        ("2023-05", dt.datetime(2023, 5, 1, tzinfo=UTC)),
        ("May 2023", dt.datetime(2023, 5, 1, tzinfo=UTC)),
        ("Sept., 2022", dt.datetime(2022, 9, 1, tzinfo=UTC)),
    ],
)
def test_written_and_iso_dates_are_read(text: str, expected: dt.datetime) -> None:
    assert parse_when(text) == expected


@pytest.mark.parametrize(
    "value",
    [
        "yesterday",
        "31 June, 2023",  # no such day
        "13:56 pm on 8 May, 2023",  # no 13 pm
        "0:30 am on 8 May, 2023",
        "8 Mayday 2023",
        "2023-13-01",
        "2023-13",
        "0000",
        "Mayday 2023",
        "",
        None,
        True,
        float("nan"),
        float("inf"),
        [2023, 5, 8],
    ],
)
def test_what_names_no_instant_is_none(value: object) -> None:
    assert parse_when(value) is None


def test_objects_and_unix_seconds_are_read() -> None:
    moment = dt.datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert parse_when(moment.timestamp()) == moment
    assert parse_when(int(moment.timestamp())) == moment
    assert parse_when(dt.datetime(2023, 5, 8, 13, 56)) == moment, "naive: UTC"
    assert parse_when(moment.astimezone(dt.timezone(dt.timedelta(hours=-7)))) == moment
    assert parse_when(dt.date(2023, 5, 8)) == dt.datetime(2023, 5, 8, tzinfo=UTC)


def test_iso_only_reading_refuses_written_dates() -> None:
    assert parse_instant("2023-05-08") == dt.datetime(2023, 5, 8, tzinfo=UTC)
    assert parse_instant("8 May, 2023") is None and parse_instant(1683554160) is None


@given(st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1)))
def test_a_written_date_with_its_time_reads_back(moment: dt.datetime) -> None:
    minute = moment.replace(second=0, microsecond=0)
    half = "am" if minute.hour < 12 else "pm"
    hour = minute.hour % 12 or 12
    text = f"{hour}:{minute.minute:02d} {half} on {minute.day} {minute:%B}, {minute.year}"
    assert parse_when(text) == minute.replace(tzinfo=UTC)
    assert parse_when(minute.isoformat()) == minute.replace(tzinfo=UTC)


END = dt.timedelta(microseconds=1)


@pytest.mark.parametrize(
    ("value", "first", "after"),
    [
        ("2023", dt.datetime(2023, 1, 1, tzinfo=UTC), dt.datetime(2024, 1, 1, tzinfo=UTC)),
        ("2023-12", dt.datetime(2023, 12, 1, tzinfo=UTC), dt.datetime(2024, 1, 1, tzinfo=UTC)),
        ("Feb 2024", dt.datetime(2024, 2, 1, tzinfo=UTC), dt.datetime(2024, 3, 1, tzinfo=UTC)),
        ("2023-05-08", dt.datetime(2023, 5, 8, tzinfo=UTC), dt.datetime(2023, 5, 9, tzinfo=UTC)),
        ("8 May, 2023", dt.datetime(2023, 5, 8, tzinfo=UTC), dt.datetime(2023, 5, 9, tzinfo=UTC)),
        (
            dt.date(2024, 2, 29),
            dt.datetime(2024, 2, 29, tzinfo=UTC),
            dt.datetime(2024, 3, 1, tzinfo=UTC),
        ),
    ],
)
def test_a_day_month_or_year_written_alone_spans_all_of_it(
    value: object, first: dt.datetime, after: dt.datetime
) -> None:
    assert parse_span(value) == (first, after - END)
    assert parse_when(value) == first


def test_an_instant_spans_itself_and_the_last_year_ends_with_datetime() -> None:
    moment = dt.datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    for value in ("1:56 pm on 8 May, 2023", "2023-05-08T13:56:00Z", moment, moment.timestamp()):
        assert parse_span(value) == (moment, moment), value
    assert parse_span("9999") == (
        dt.datetime(9999, 1, 1, tzinfo=UTC),
        dt.datetime.max.replace(tzinfo=UTC),
    )
    assert parse_span("9999-12-31")[1] == dt.datetime.max.replace(tzinfo=UTC)  # type: ignore[index]
    assert parse_span("someday") is None and parse_span(True) is None
