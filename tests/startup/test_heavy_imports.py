"""resources/startup.py: heavy imports run with the collector off, then what they loaded is frozen;
the collector comes back on (also after an error) and a nested block leaves that to the outer one."""

import gc
import subprocess
import sys
import textwrap

import pytest

from resources.startup import heavy_imports
from tests.conftest import REPO_ROOT


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_block_runs_without_the_collector_and_freezes_what_it_made(collector_on):
    before = gc.get_freeze_count()
    with heavy_imports():
        assert not gc.isenabled()
        made = [[i] for i in range(1000)]  # tracked containers, alive after the block
    assert gc.isenabled()
    assert gc.get_freeze_count() >= before + len(made)


def test_an_error_in_the_block_turns_the_collector_back_on(collector_on):
    with pytest.raises(ImportError):
        with heavy_imports():
            import quandary_no_such_module  # noqa: F401
    assert gc.isenabled()


def test_a_nested_block_leaves_the_collector_off_until_the_outer_one_ends(collector_on):
    with heavy_imports():
        with heavy_imports():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_turned_off_by_the_caller_stays_off():
    was = gc.isenabled()
    gc.disable()
    try:
        with heavy_imports():
            pass
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()


def test_frozen_objects_are_still_freed_by_reference_counting_and_later_cycles_collected(collector_on):
    import weakref

    class Node:
        pass

    with heavy_imports():
        plain = Node()
    ref = weakref.ref(plain)
    del plain  # no cycle: reference counting frees it although it is frozen
    assert ref() is None
    a, b = Node(), Node()  # a cycle made after the block: the collector still finds it
    a.other, b.other = b, a
    ref = weakref.ref(a)
    del a, b
    gc.collect()
    assert ref() is None


def test_loading_the_definitions_leaves_the_collector_on_and_their_objects_frozen():
    """In a fresh process (this one has loaded them already): the Definitions' import is the block."""
    code = textwrap.dedent(
        """
        import gc
        assert gc.isenabled() and gc.get_freeze_count() == 0
        import assets.definitions
        print(gc.isenabled(), gc.get_freeze_count())
        """
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    enabled, frozen = out.stdout.split()
    assert enabled == "True" and int(frozen) > 100_000, out.stdout
