"""A stop at once that cut a call to Spark, whose clean-up then failed on the broken py4j
connection, is a stop, not the dataset's failure (journey 43 saw `transform failed:
Py4JNetworkError: Answer from Java side is empty` after Ctrl-C then SIGTERM)."""

from __future__ import annotations

import pytest

from reconciler.apply.run import _raised_by_a_stop


def _cleanup_failing_after(first: BaseException) -> Exception:
    try:
        try:
            raise first
        finally:
            raise ConnectionError("Answer from Java side is empty")  # the clean-up's call
    except ConnectionError as e:
        return e


def test_an_error_raised_while_a_stop_was_on_its_way_out_is_the_stop() -> None:
    assert _raised_by_a_stop(_cleanup_failing_after(KeyboardInterrupt()))
    wrapped = _cleanup_failing_after(KeyboardInterrupt())
    try:
        raise ValueError("the handler's own error") from None
    except ValueError as e:
        e.__context__ = wrapped  # two levels down: still the stop's doing
        assert _raised_by_a_stop(e)


@pytest.mark.parametrize("first", [RuntimeError("a query failed"), OSError("disk full")])
def test_an_error_after_an_ordinary_failure_is_a_failure(first: Exception) -> None:
    assert not _raised_by_a_stop(_cleanup_failing_after(first))
    assert not _raised_by_a_stop(ValueError("alone"))
