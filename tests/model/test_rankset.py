import pytest

from tracekit.model.rankset import format_ranks, parse_ranks, rank_list


def test_format_ranges_and_singletons():
    assert format_ranks([3, 0, 1, 2, 5, 7, 8]) == "0-3,5,7-8"
    assert format_ranks(iter([1024 - 1, *range(0, 300), *range(301, 777), *range(778, 1023)])) == \
        "0-299,301-776,778-1023"
    assert format_ranks([]) == ""
    assert format_ranks([None, 2, 2]) == "2,-"


def test_parse_round_trip_and_errors():
    assert parse_ranks("0-3,5") == [0, 1, 2, 3, 5]
    assert parse_ranks(format_ranks([300, 777])) == [300, 777]
    for bad in ("a", "3-1", "1-", "-2-3"):
        with pytest.raises(ValueError):
            parse_ranks(bad)


def test_rank_list_reads_a_range_string_or_a_list():
    assert rank_list("0-2,5,-") == [0, 1, 2, 5, None]  # summary/2 spells a rank set as ranges
    assert rank_list([3, 1, None]) == [3, 1, None]  # summary/1 as a list, kept in its order
    with pytest.raises(ValueError, match="not a rank range"):
        rank_list("0-2,x")
