"""The convention for the input part of a test's name (docs/getting-started.md, "Iterate on one test"): a
bare number is an element count; otherwise every number carries a letter for its dimension (w33_h7,
r31_c33, m17_n33_k65, n1000_grid4_block256). `grader check` holds every listed test to it: `33x7` alone
does not say which number is the width, and a student reading it the other way looks for the bug in the
wrong place.
"""

from __future__ import annotations

import re

# Numbers joined by "x" with no letter before them: "33x7", "n1000_4x256".
UNLABELLED = re.compile(r"(?:^|_)\d+x\d+")


def size_name_problem(name: str) -> str | None:
    """Why the input part of a test's name breaks the convention (None: it keeps it)."""
    _, slash, param = name.rpartition("/")
    if not slash or not UNLABELLED.search(param):
        return None
    return (f"{name}: {param!r} does not say which number is which; give each a letter (w33_h7 for an image, "
            "r7_c33 for a matrix, grid4_block256 or block32x4 for a launch), as docs/getting-started.md says")
