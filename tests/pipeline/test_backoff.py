"""The send retry delay: backoff with jitter, never before the provider's Retry-After."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.backoff import retry_delay

U = st.floats(min_value=0, max_value=1, exclude_max=True)


@given(st.integers(0, 30), st.none() | st.floats(0, 10_000), U)
def test_never_before_retry_after_and_never_past_the_cap_without_one(
    retries: int, retry_after: float | None, u: float
) -> None:
    wait = retry_delay(retries, retry_after_s=retry_after, u=u, cap_s=300)
    if retry_after is not None:
        assert retry_after <= wait <= retry_after + 1
    else:
        assert 0 < wait <= 300


def test_backoff_doubles_with_half_of_it_drawn() -> None:
    assert [retry_delay(n, retry_after_s=None, u=0, cap_s=300) for n in range(4)] == [
        1,
        2,
        4,
        8,
    ]
    assert retry_delay(3, retry_after_s=None, u=0.999, cap_s=300) == pytest.approx(16, abs=0.01)
    assert retry_delay(20, retry_after_s=None, u=0.5, cap_s=300) == 225


def test_a_retry_after_is_waited_as_given_plus_jitter_however_often_it_came() -> None:
    assert retry_delay(0, retry_after_s=30, u=0.25, cap_s=300) == 30.25
    assert retry_delay(10, retry_after_s=1, u=0.0, cap_s=300) == 1  # no growing wait
    assert retry_delay(0, retry_after_s=900, u=0.0, cap_s=300) == 900  # the caller parks it


def test_a_draw_outside_the_unit_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="u must be"):
        retry_delay(0, retry_after_s=None, u=1.0, cap_s=300)
