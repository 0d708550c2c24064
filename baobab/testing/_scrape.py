"""Reading a ``/metrics`` answer as Prometheus does: through prometheus_client's own text parser."""

from __future__ import annotations

import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["Scrape", "scrape"]


@dataclass(frozen=True)
class Scrape:
    """The samples of one scrape: (sample name, its labels) → value.

    Sample names are as exposed (``baobab_api_requests_total``, ``..._bucket``, ``..._count``).
    """

    samples: Mapping[tuple[str, frozenset[tuple[str, str]]], float]

    @classmethod
    def parse(cls, text: str) -> Scrape:
        """Parse an exposition; raises ValueError where prometheus_client's parser does."""
        samples = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
        return cls(samples)

    def value(self, name: str, **labels: str) -> float:
        """The sample with exactly these labels; 0 when there is none (a series not created yet)."""
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def total(self, name: str, **labels: str) -> float:
        """The sum over every sample named ``name`` whose labels include ``labels``."""
        wanted = set(labels.items())
        return sum(value for (sample, have), value in self.samples.items() if sample == name and wanted <= have)

    def series(self, name: str) -> list[dict[str, str]]:
        """The label sets of the samples named ``name``."""
        return [dict(labels) for sample, labels in self.samples if sample == name]


def scrape(url: str, *, timeout: float = 10.0) -> Scrape:
    """``GET url`` (a ``/metrics``, never through a proxy) and parse it.

    Raises:
        urllib.error.HTTPError: the answer is not a 2xx.
        ValueError: the body is not Prometheus' text format.
    """
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as response:
        return Scrape.parse(response.read().decode("utf-8"))
