"""How an error is named in the one line a command prints."""

from __future__ import annotations

from kafka.errors import KafkaTimeoutError

from streamdedup.errors import describe, shown


def test_an_error_is_named_once() -> None:
    """kafka-python's errors name themselves: "KafkaTimeoutError: KafkaTimeoutError: ..."."""
    assert describe(KafkaTimeoutError("Unable to bootstrap")) == \
        "KafkaTimeoutError: Unable to bootstrap"
    assert describe(ValueError("boom")) == "ValueError: boom"
    assert describe(ValueError()) == "ValueError"
    from kafka.errors import MessageSizeTooLargeError  # "[Error 10] MessageSizeTooLarge..."

    assert describe(MessageSizeTooLargeError("too big")).count("MessageSizeTooLargeError") == 1


def test_a_long_value_is_cut_inside_its_quotes() -> None:
    """The cut was made in the repr: the closing quote went with the rest."""
    assert shown("x" * 100, 20) == "'" + "x" * 18 + "'…"
    assert shown("short") == "'short'" and shown(list(range(50)), 10) == "[0, 1, 2, …"
