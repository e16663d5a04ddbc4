#!/usr/bin/env python3
"""Two results.json side by side, timings left out: what a change of the grader changed in a grade.

    bench/results_diff.py OLD/results.json NEW/results.json

Compared: each lab's score and maximum, its builds (target, ok, category, message), its messages, every
test (status, category, kind, binary, task, message, hint) and task (points earned, tests counted, perf
points, notes), and the run's notes. Left out: times, build logs, perf series, the run's clock. Exit 0
when the two agree, 1 with the differences listed.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

_SECONDS = re.compile(r"\b\d+(?:\.\d+)? ?(?:s|ms|µs)\b")  # "(1.2 s)" in a message is a time


def _text(value: Any) -> Any:
    return _SECONDS.sub("<time>", value) if isinstance(value, str) else value


def normalize(data: dict[str, Any]) -> dict[str, Any]:
    labs = {}
    for lab in data.get("labs", []):
        labs[lab["name"]] = {
            "score": lab.get("score"), "max_score": lab.get("max_score"),
            "builds": [{k: _text(b.get(k)) for k in ("target", "ok", "category", "message")} for b in lab.get("builds", [])],
            "messages": [_text(m) for m in lab.get("messages", [])],
            "tests": {t["name"] + "@" + str(t.get("binary")): {k: _text(t.get(k)) for k in
                      ("status", "category", "kind", "task", "message", "hint")} for t in lab.get("tests", [])},
            "tasks": {t["id"]: {k: _text(t.get(k)) for k in
                      ("points", "earned", "tests_passed", "tests_total", "perf_points", "perf_earned", "notes")}
                      for t in lab.get("tasks", [])},
        }
    notes = [_text(n) for n in data.get("run", {}).get("notes", [])]
    return {"labs": labs, "notes": notes}


def differences(old: Any, new: Any, where: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new)):
            if key not in new:
                out.append(f"{where}/{key}: only in the old")
            elif key not in old:
                out.append(f"{where}/{key}: only in the new")
            else:
                out += differences(old[key], new[key], f"{where}/{key}")
        return out
    if old != new:
        return [f"{where}: {old!r} -> {new!r}"]
    return []


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    old, new = (normalize(json.loads(Path(a).read_text())) for a in args)
    found = differences(old, new)
    tests = sum(len(lab["tests"]) for lab in new["labs"].values())
    for line in found:
        print(line)
    print(f"{len(new['labs'])} labs, {tests} tests compared: "
          + ("the same, timings aside" if not found else f"{len(found)} difference(s)"))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
