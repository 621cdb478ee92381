"""Reading ``/metrics`` as Prometheus does: the text parsed with ``prometheus_client``'s own
parser (a page it cannot parse fails the test), its samples looked up by name and labels."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

DOCS = Path(__file__).resolve().parents[1] / "docs" / "metrics.md"


class Scraped:
    """One scrape: every sample, keyed by its name and labels."""

    def __init__(self, text: str) -> None:
        self.families = {f.name: f for f in text_string_to_metric_families(text)}
        self.samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        for family in self.families.values():
            for sample in family.samples:
                key = (sample.name, frozenset(sample.labels.items()))
                assert key not in self.samples, f"{sample.name} {sample.labels} twice"
                self.samples[key] = sample.value

    def value(self, name: str, **labels: str) -> float | None:
        return self.samples.get((name, frozenset(labels.items())))

    def get(self, name: str, **labels: str) -> float:
        found = self.value(name, **labels)
        assert found is not None, f"no {name} {labels} in {sorted(self.names())}"
        return found

    def where(self, name: str, **labels: str) -> dict[frozenset[tuple[str, str]], float]:
        """Every sample of ``name`` whose labels include ``labels``."""
        wanted = set(labels.items())
        return {
            found: value
            for (sample, found), value in self.samples.items()
            if sample == name and wanted <= found
        }

    def total(self, name: str, **labels: str) -> float:
        return sum(self.where(name, **labels).values())

    def names(self) -> set[str]:
        return {name for name, _ in self.samples}

    def declared(self) -> set[str]:
        """Every metric the page declares (``# TYPE``), samples or not, named as documented
        (a counter with ``_total``)."""
        return {f.name + ("_total" if f.type == "counter" else "") for f in self.families.values()}


def documented() -> set[str]:
    """The metrics ``docs/metrics.md`` lists (the first column of its tables)."""
    return set(re.findall(r"^\| `(jetyard_[a-z_]+)` \|", DOCS.read_text(), re.MULTILINE))


def family(name: str) -> str:
    """A sample's name as its metric is documented (a counter keeps ``_total``)."""
    for suffix in ("_bucket", "_count", "_sum", "_created"):
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name
