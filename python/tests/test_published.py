"""Every study's published figures come with their source and the quoted line they were read from.

A figure is a float column of ``PUBLISHED`` (the key columns are ints and strings); each non-NaN figure must be
one of the numbers written in its row's ``source_quote``, parsed from the quote's text, so a figure typed in
without its line, or mistyped, fails here.
"""

from __future__ import annotations

import re

import pandas as pd
import pytest

from alloclab import studies
from alloclab.studies import SOURCE_COLUMNS, cma, hugetlb

NUMBER = re.compile(r"\d+(?:\.\d+)?")
FOUND, BROKEN = studies.discover()


def quoted_numbers(quote: str) -> list[float]:
    return [float(n) for n in NUMBER.findall(quote)]


def missing_figures(published: pd.DataFrame) -> list[str]:
    """``"<column>=<value> not in <quote>"`` for every float figure that its row's quote does not contain."""
    figures = [c for c in published.columns if c not in SOURCE_COLUMNS and pd.api.types.is_float_dtype(published[c])]
    missing = []
    for _, row in published.iterrows():
        numbers = quoted_numbers(row["source_quote"])
        for c in figures:
            if pd.notna(row[c]) and not any(row[c] == pytest.approx(n) for n in numbers):
                missing.append(f"{c}={row[c]} not in {row['source_quote']!r}")
    return missing


def test_every_study_imports():
    assert not BROKEN


@pytest.mark.parametrize("name", [n for n, s in FOUND.items() if len(s.published)])
def test_each_published_figure_is_in_its_quoted_source(name):
    published = FOUND[name].published
    assert set(SOURCE_COLUMNS) <= set(published.columns), f"{name}: PUBLISHED lacks {SOURCE_COLUMNS}"
    for c in SOURCE_COLUMNS:
        assert published[c].map(lambda v: isinstance(v, str) and bool(v.strip())).all(), f"{name}: empty {c}"
    assert not missing_figures(published)


def test_the_cma_terminals_are_in_their_quoted_source():
    assert not missing_figures(cma.PUBLISHED_TERMINALS)


def test_the_hugetlb_headline_is_in_its_quoted_source():
    assert not missing_figures(hugetlb.PUBLISHED_HEADLINE)


def test_a_figure_missing_from_its_quote_is_caught():
    bad = pd.DataFrame({"n": [1], "ms": [359.0], "source": ["seed"], "source_quote": ["| 256G 2node | 358ms |"]})
    assert missing_figures(bad) == ["ms=359.0 not in '| 256G 2node | 358ms |'"]
