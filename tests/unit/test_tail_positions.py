"""``events.tail.positions`` and ``deliveries``: a delivery's sequences, pending count and
delivery count read from its reply subject, the same as nats-py's ``Msg.metadata`` reads them,
in both of the server's forms."""

from __future__ import annotations

import nats.errors
import pytest
from hypothesis import given
from hypothesis import strategies as st
from nats.aio.msg import Msg

from events.tail import deliveries, positions

counts = st.integers(min_value=0, max_value=2**63)
names = st.from_regex(r"[A-Za-z0-9_-]{1,12}", fullmatch=True)


def v1(stream: str, consumer: str, sseq: int, cseq: int, pending: int, sent: int = 1) -> str:
    return f"$JS.ACK.{stream}.{consumer}.{sent}.{sseq}.{cseq}.1700000000000000000.{pending}"


def v2(
    stream: str, consumer: str, sseq: int, cseq: int, pending: int, token: bool, sent: int = 3
) -> str:
    times = f"{sent}.{sseq}.{cseq}.1700000000000000000.{pending}"
    reply = f"$JS.ACK._.ACCHASH.{stream}.{consumer}.{times}"
    return reply + ".tok" if token else reply


@given(names, names, counts, counts, counts, st.sampled_from(["v1", "v2", "v2+token"]))
def test_positions_read_what_nats_py_reads(
    stream: str, consumer: str, sseq: int, cseq: int, pending: int, form: str
) -> None:
    reply = (
        v1(stream, consumer, sseq, cseq, pending)
        if form == "v1"
        else v2(stream, consumer, sseq, cseq, pending, token=form == "v2+token")
    )
    meta = Msg(_client=None, subject="ev.node.x", reply=reply).metadata  # type: ignore[arg-type]
    assert positions(reply) == (meta.sequence.stream, meta.sequence.consumer, meta.num_pending)
    assert positions(reply) == (sseq, cseq, pending)


@given(names, counts, counts, st.integers(min_value=1, max_value=2**31), st.booleans())
def test_deliveries_read_what_nats_py_reads(
    consumer: str, sseq: int, pending: int, sent: int, second_form: bool
) -> None:
    reply = (
        v2("S", consumer, sseq, 1, pending, token=False, sent=sent)
        if second_form
        else v1("S", consumer, sseq, 1, pending, sent=sent)
    )
    meta = Msg(_client=None, subject="cmd.session.x", reply=reply).metadata  # type: ignore[arg-type]
    assert deliveries(reply) == meta.num_delivered == sent


@pytest.mark.parametrize(
    "reply",
    ["", "_INBOX.abc", "$JS.ACK.s.c.1.2.3.4", "$JS.ACK._.h.s.c.1.2.3.4", "$JS.NAK.s.c.1.2.3.4.5"],
)
def test_a_reply_that_is_no_delivery_is_an_error(reply: str) -> None:
    with pytest.raises(nats.errors.Error, match="not a JetStream delivery"):
        positions(reply)
    with pytest.raises(nats.errors.Error, match="not a JetStream delivery"):
        deliveries(reply)
