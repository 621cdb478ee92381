"""The seal chain and its verifier over a log held in memory: an untouched log verifies, and
each way of tampering with it is found at the position where it happened."""

from __future__ import annotations

from dataclasses import replace

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from events.audit.chain import GENESIS, Chain, LogMessage, link
from events.audit.seals import Seal, SealError, trusted
from events.audit.verify import Verifier, VerifyReport
from tests.unit.audit.support import log_of, message, seal_log, with_data

KEY = Ed25519PrivateKey.generate()
KEYS = trusted([KEY.public_key()])


def verify(
    log: list[LogMessage], seals: list[Seal], *, start: Seal | None = None,
    anchor: str | None = None,
) -> VerifyReport:  # fmt: skip
    verifier = Verifier(seals, KEYS, start=start, anchor=anchor)
    for item in log:
        if not verifier.message(item):
            break
    return verifier.finish()


def failed_at(report: VerifyReport) -> tuple[int, str]:
    assert report.problem is not None, report.summary()
    return report.problem.position, report.problem.kind


def test_an_untouched_log_verifies_with_every_seal() -> None:
    log = log_of(25)
    report = verify(log, seal_log(log, KEY, every=10))
    assert report.ok, report.summary()
    assert (report.events, report.seals, report.sealed_to, report.unsealed) == (25, 3, 25, 0)


def test_events_after_the_last_seal_are_counted_not_failed() -> None:
    log = log_of(25)
    report = verify(log, seal_log(log[:20], KEY, every=10))
    assert report.ok
    assert (report.sealed_to, report.unsealed) == (20, 5)
    assert "5 events after it not sealed yet" in report.summary()


def test_the_link_covers_position_subject_content_headers_and_bytes_only() -> None:
    item = message(7)
    base = link(GENESIS, item)
    assert link(GENESIS, replace(item, seq=8)) != base
    assert link(GENESIS, replace(item, subject="ev.session.other")) != base
    assert link(GENESIS, replace(item, headers={**item.headers, "Jy-Event": "X"})) != base
    assert link(GENESIS, with_data(item, item.data + b" ")) != base
    protocol = {**item.headers, "Nats-Expected-Last-Subject-Sequence": "3"}
    assert link(GENESIS, replace(item, headers=protocol)) == base


def test_one_changed_byte_of_a_payload_is_named_by_its_position() -> None:
    log = log_of(25)
    seals = seal_log(log, KEY, every=10)
    changed = bytearray(log[12].data)
    changed[5] ^= 0x01
    log[12] = with_data(log[12], bytes(changed))
    assert failed_at(verify(log, seals)) == (13, "changed")


def test_a_removed_event_is_named_by_its_position() -> None:
    log = log_of(25)
    seals = seal_log(log, KEY, every=10)
    del log[12]
    assert failed_at(verify(log, seals)) == (13, "missing")


def test_a_removed_event_with_the_rest_renumbered_is_found_where_it_was() -> None:
    log = log_of(25)
    seals = seal_log(log, KEY, every=10)
    shifted = log[:12] + [replace(m, seq=m.seq - 1) for m in log[13:]]
    assert failed_at(verify(shifted, seals)) == (13, "changed")


def test_two_swapped_events_are_found_at_the_first() -> None:
    log = log_of(25)
    seals = seal_log(log, KEY, every=10)
    log[12], log[13] = log[13], log[12]
    assert failed_at(verify(log, seals)) == (13, "missing")
    swapped_bytes = log_of(25)
    a, b = swapped_bytes[12], swapped_bytes[13]
    swapped_bytes[12], swapped_bytes[13] = replace(b, seq=13), replace(a, seq=14)
    assert failed_at(verify(swapped_bytes, seals)) == (13, "changed")


def test_an_inserted_event_is_found_where_it_was_put() -> None:
    log = log_of(25)
    seals = seal_log(log, KEY, every=10)
    forged = message(13, "forged")
    renumbered = log[:12] + [forged] + [replace(m, seq=m.seq + 1) for m in log[12:]]
    assert failed_at(verify(renumbered, seals)) == (13, "changed")
    doubled = [*log[:13], replace(forged, seq=13), *log[13:]]
    assert failed_at(verify(doubled, seals)) == (13, "reordered")


def test_a_truncated_log_is_missing_what_its_seals_cover() -> None:
    log = log_of(25)
    seals = seal_log(log, KEY, every=10)
    assert failed_at(verify(log[:17], seals)) == (18, "missing")


def test_a_seal_signed_by_another_key_is_refused() -> None:
    log = log_of(25)
    seals = seal_log(log, KEY, every=10)
    forged = seal_log(log, Ed25519PrivateKey.generate(), every=10)
    seals[1] = forged[1]
    report = verify(log, seals)
    assert failed_at(report) == (11, "seal")
    assert report.problem is not None and "not signed by a trusted key" in report.problem.text


def test_a_seal_altered_after_signing_is_refused() -> None:
    log = log_of(25)
    seals = seal_log(log, KEY, every=10)
    seals[1] = seals[1].model_copy(update={"head": "0" * 64})
    assert failed_at(verify(log, seals)) == (11, "seal")


def test_a_log_rewritten_and_sealed_again_with_the_key_fails_only_the_anchor() -> None:
    log = log_of(25)
    seals = seal_log(log, KEY, every=10)
    anchor = seals[1].digest()
    assert verify(log, seals, anchor=anchor).ok
    rewritten = [*log[:12], message(13, "rewritten"), *log[13:]]
    resealed = seal_log(rewritten, KEY, every=10)
    assert failed_at(verify(rewritten, resealed, anchor=anchor)) == (0, "anchor")


def test_a_removed_seal_breaks_the_chain_of_seals() -> None:
    log = log_of(35)
    seals = seal_log(log, KEY, every=10)
    del seals[1]
    report = verify(log, seals)
    assert failed_at(report) == (21, "seal")
    assert report.problem is not None and "numbered 3 where seal 2 belongs" in report.problem.text


def test_a_problem_in_the_events_before_a_bad_seal_is_said_first() -> None:
    log = log_of(35)
    seals = seal_log(log, KEY, every=10)
    seals[2] = seals[2].model_copy(update={"head": "0" * 64})
    log[4] = with_data(log[4], b"{}")
    assert failed_at(verify(log, seals)) == (5, "changed")


def test_verifying_from_a_trusted_seal_reads_nothing_before_it() -> None:
    log = log_of(25)
    seals = seal_log(log, KEY, every=10)
    log[2] = with_data(log[2], b"changed before the trusted seal")  # not read again
    report = verify(log, seals, start=seals[1], anchor=seals[1].digest())
    assert report.ok, report.summary()
    assert (report.events, report.seals, report.sealed_to) == (5, 1, 25)
    log[22] = with_data(log[22], b"changed after it")
    assert failed_at(verify(log, seals, start=seals[1], anchor=seals[1].digest())) == (
        23, "changed",
    )  # fmt: skip
    with pytest.raises(SealError, match="not the anchored"):
        Verifier(seals, KEYS, start=seals[1], anchor=seals[0].digest())


def test_a_seal_whose_marks_do_not_match_its_count_is_refused() -> None:
    with pytest.raises(SealError, match="marks for"):
        seal_log(log_of(3), KEY, every=10)[0].model_copy(update={"count": 2}).mark_list()


def test_seals_refuse_malformed_input_with_the_reason() -> None:
    with pytest.raises(SealError, match="not a seal"):
        Seal.from_bytes(b'{"number": "x"}')
    with pytest.raises(SealError, match="not a seal"):
        Seal.from_bytes(b"\xff\xfe")


def test_the_chain_refuses_a_message_out_of_order() -> None:
    chain = Chain()
    chain.add(message(2))
    with pytest.raises(ValueError, match="does not follow"):
        chain.add(message(2))
