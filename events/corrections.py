"""What a consumer keeps of the operators' corrections (``ev.correction.*``): events to read
past, and aggregates given up. ``FoldedState`` takes each correction event here; ``Fold`` then
folds a held aggregate again without its skipped events, and releases its quarantine entries.
Pure; no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field

from events.domain.correction import AggregateVoided, EventSkipped
from events.envelope import Envelope


@dataclass
class Corrections:
    skipped: dict[str, set[int]] = field(default_factory=dict)
    """Subject -> stream sequences never to fold."""
    voided: set[str] = field(default_factory=set)
    """Subjects given up for good."""
    to_rebuild: dict[str, None] = field(default_factory=dict)
    """Held subjects to fold again from their first event, now that an event is skipped."""
    resolved: dict[str, None] = field(default_factory=dict)
    """Subjects whose quarantine entries this consumer may release."""

    def take(self, envelope: Envelope) -> tuple[str, bool]:
        """Note one correction: (the corrected subject, whether it was voided). Raises if the
        event does not read (the correction itself is then held like any other)."""
        if envelope.name == AggregateVoided.event_name:
            voided = AggregateVoided.model_validate(envelope.payload)
            self.voided.add(voided.subject)
            self.resolved[voided.subject] = None
            return voided.subject, True
        skipped = EventSkipped.model_validate(envelope.payload)
        self.skipped.setdefault(skipped.subject, set()).add(skipped.seq)
        return skipped.subject, False

    def skips(self, subject: str, seq: int) -> bool:
        return subject in self.voided or seq in self.skipped.get(subject, ())
