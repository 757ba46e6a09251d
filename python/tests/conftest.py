"""Shared fixtures: the package on sys.path, and fresh random inputs each run with the seed
printed in pytest's header (MOEFUSE_SEED=<n> repeats a run)."""

import os
import sys
import time
import zlib

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # python/, so `import moefuse` finds this checkout's package
sys.path.insert(0, HERE)  # reference.py

SEED = int(os.environ.get("MOEFUSE_SEED", "0")) or int(time.time() * 1000) % (2 ** 31)


def pytest_report_header(config):
    return f"moefuse seed: {SEED} (set MOEFUSE_SEED={SEED} to repeat)"


@pytest.fixture
def rng(request):
    """A generator seeded from the run's seed and the test's name (independent per test)."""
    import numpy as np

    return np.random.default_rng([SEED, zlib.crc32(request.node.nodeid.encode())])
