"""`settle`: what a server made before it served is left out of the collector's passes."""

from __future__ import annotations

import gc

from raven.heap import settle


def test_what_lived_before_settling_is_never_walked_again() -> None:
    before = {"made": ["at start-up"]}
    try:
        settle()
        after = {"made": ["while serving"]}
        walked = {id(o) for o in gc.get_objects()}
        assert id(before) not in walked and id(after) in walked
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()  # the rest of the test run is collected as usual
    assert id(before) in {id(o) for o in gc.get_objects()}
