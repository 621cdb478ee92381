"""What a usage report accepts, before anything is read: the range (time zones, order, at most
366 days, the ends of the calendar), the filters (ids), and the CSV's query string (required
and unknown parameters, groupBy in any case, ISO 8601 times)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from starlette.datastructures import QueryParams

from projections.usage.accounting import UsageGroup
from services.gateway.usage.download import ask_of
from services.gateway.usage.report import UsageAsk, UsageInputError, checked

START = datetime(2026, 3, 1, tzinfo=UTC)


def ask(
    start: datetime = START, end: datetime = START + timedelta(days=1), **filters: str
) -> UsageAsk:
    return UsageAsk(start=start, end=end, group_by=UsageGroup.USER, **filters)


def test_times_are_taken_to_utc_and_a_year_of_366_days_is_the_most() -> None:
    tokyo = timezone(timedelta(hours=9))
    good = checked(ask(START.astimezone(tokyo), START + timedelta(days=366)))
    assert (good.start, good.end) == (START, START + timedelta(days=366))
    assert good.start.tzinfo == UTC


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (ask(end=START), "to must be after from"),
        (ask(end=START - timedelta(seconds=1)), "to must be after from"),
        (ask(end=START + timedelta(days=366, microseconds=1)), "at most 366 days"),
        (ask(start=datetime(2026, 3, 1)), "has no time zone"),
        (
            ask(datetime.min.replace(tzinfo=timezone(timedelta(hours=14))), START),
            "between the years 1 and 9999",
        ),
        (ask(user_id="a b"), "userId 'a b' is not a valid id"),
        (ask(domain="x" * 65), "domain"),
        (ask(resource_group="gpu/1"), "resourceGroup"),
        (ask(project="p\x00"), "projectId"),
    ],
)
def test_bad_ranges_and_filters_are_refused_naming_what_is_wrong(
    given: UsageAsk, says: str
) -> None:
    with pytest.raises(UsageInputError, match=says.replace("(", r"\(")):
        checked(given)


def test_the_csv_query_string_is_the_query_s_arguments() -> None:
    parsed = ask_of(
        QueryParams(
            "from=2026-03-01T00:00:00Z&to=2026-03-02T00:00:00%2B09:00&groupBy=resourceGroup"
            "&domain=d1&projectId=p1&userId=u1&resourceGroup=gpu"
        )
    )
    assert parsed == UsageAsk(
        start=START, end=datetime(2026, 3, 2, tzinfo=timezone(timedelta(hours=9))),
        group_by=UsageGroup.RESOURCE_GROUP, domain="d1", project="p1", user_id="u1",
        resource_group="gpu",
    )  # fmt: skip
    for spelled in ("user", "USER", "User"):
        assert (
            ask_of(
                QueryParams(f"from=2026-03-01T00:00Z&to=2026-03-02T00:00Z&groupBy={spelled}")
            ).group_by
            is UsageGroup.USER
        )


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("to=2026-03-02T00:00Z&groupBy=user", "from is required"),
        ("from=2026-03-01T00:00Z&groupBy=user", "to is required"),
        ("from=2026-03-01T00:00Z&to=2026-03-02T00:00Z", "groupBy is required"),
        ("from=2026-03-01T00:00Z&to=2026-03-02T00:00Z&groupBy=team", "groupBy must be session"),
        ("from=soon&to=2026-03-02T00:00Z&groupBy=user", "is not an ISO 8601 time"),
        ("from=2026-03-01T00:00Z&to=2026-03-02T00:00Z&groupBy=user&sort=cpu", "unknown parameter"),
        ("from=2026-03-01T00:00Z&from=2026-03-01T00:00Z&to=x&groupBy=user", "given 2 times"),
    ],
)
def test_bad_csv_query_strings_are_refused(query: str, says: str) -> None:
    with pytest.raises(UsageInputError, match=says):
        ask_of(QueryParams(query))
