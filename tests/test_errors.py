"""How an error is named in the one line a command prints."""

from __future__ import annotations

from kafka.errors import KafkaTimeoutError

from streamdedup.errors import describe


def test_an_error_is_named_once() -> None:
    """kafka-python's errors name themselves: "KafkaTimeoutError: KafkaTimeoutError: ..."."""
    assert describe(KafkaTimeoutError("Unable to bootstrap")) == \
        "KafkaTimeoutError: Unable to bootstrap"
    assert describe(ValueError("boom")) == "ValueError: boom"
    assert describe(ValueError()) == "ValueError"
    from kafka.errors import MessageSizeTooLargeError  # "[Error 10] MessageSizeTooLarge..."

    assert describe(MessageSizeTooLargeError("too big")).count("MessageSizeTooLargeError") == 1
