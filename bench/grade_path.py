#!/usr/bin/env python3
"""Follow one grade through the grader's code: which module calls which, in order, and how often the path
climbs back up the layers (grader/__init__.py's LAYERS) or re-enters a module it had left.

    bench/grade_path.py -- grade 01 --solution --out /tmp/r     trace a grade in this process, then analyse
    bench/grade_path.py --trace calls.json -- grade 01 ...       also keep the raw trace
    bench/grade_path.py --analyze calls.json [--steps 400]       analyse a kept trace

A step is a call from a function of one grader module into a function of another (the tests left out),
from the verb's function (commands.cmd_grade) on. A re-entry is a step into a module the path had entered
before and left; it climbs when the callee's layer is above the caller's. A grade that goes down the
layers climbs never: each stage takes what it needs and returns what it made.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader import LAYERS  # noqa: E402

ENTRY = "cmd_grade"
# A comprehension's frame is code of the module that wrote it, resumed by whoever iterates: data, not a call.
COMPREHENSIONS = {"<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>"}

# Module names before the grader became packages (0.3.5), so that a trace of that tree reads in today's layers.
OLD_NAMES = {
    "errors": "model", "text": "model", "progress": "model", "results": "model", "labs": "model", "hidden": "model",
    "environment": "host", "process": "isolate", "confine": "isolate", "sandbox": "isolate", "cmake": "build",
    "compiledb": "build", "submission": "intake", "elf": "inspect", "includes": "inspect", "objcheck": "inspect",
    "techniques": "inspect", "static_checks": "inspect", "gtest": "execute", "runs": "execute",
    "sanitizer": "execute", "health": "execute", "scoring": "score", "perfcheck": "score", "hints": "score",
    "pipeline": "grade", "context": "grade", "cli": "cli", "commands": "cli", "doctor": "cli", "listing": "cli",
    "report": "report",
}


def layer(module: str) -> int:
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else ""
    package = name if name in LAYERS else OLD_NAMES.get(name, OLD_NAMES.get(name.split("_")[0], ""))
    if package in ("", "course", "authoring") and name.startswith(("batch", "slurm", "roster", "course", "late")):
        package = "course"
    return LAYERS.index(package) if package in LAYERS else len(LAYERS)


def trace(argv: list[str]) -> tuple[list[list[str]], int]:
    """The cross-module calls of `python3 -m grader ARGV`, run in this process."""
    calls: list[list[str]] = []

    def profile(frame, event, arg):  # noqa: ANN001 - sys.setprofile's signature
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        if not callee.startswith("grader") or callee.startswith("grader.tests"):
            return
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
        if caller != callee and caller.startswith("grader") and frame.f_code.co_name not in COMPREHENSIONS:
            calls.append([caller, callee, frame.f_code.co_name])

    try:
        from grader.cli.args import main
    except ImportError:  # a tree from before the packages
        from grader.cli import main  # type: ignore[no-redef]
    sys.setprofile(profile)
    try:
        code = main(argv)
    except SystemExit as err:
        code = int(err.code or 0)
    finally:
        sys.setprofile(None)
    return calls, code


def analyze(calls: list[list[str]], steps: int | None) -> dict[str, object]:
    start = next((i for i, c in enumerate(calls) if c[2] == ENTRY), 0)
    path = [c for c in calls[start:] if c[2] not in COMPREHENSIONS]
    if steps:
        path = path[:steps]
    entered: set[str] = set()
    reentries = climbs = 0
    examples: list[str] = []
    for caller, callee, function in path:
        up = layer(callee) > layer(caller)
        if callee in entered:
            reentries += 1
            if up:
                climbs += 1
                if len(examples) < 12:
                    examples.append(f"{caller} -> {callee}.{function}")
        entered.add(callee)
    upward = [f"{a} -> {b}.{f}" for a, b, f in path if layer(b) > layer(a)]
    return {"steps": len(path), "reentries": reentries, "climbing_reentries": climbs,
            "upward_calls": len(upward), "upward_distinct": sorted(set(upward)), "examples": examples}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, help="keep the raw trace here")
    parser.add_argument("--analyze", type=Path, help="analyse a kept trace instead of grading")
    parser.add_argument("--steps", type=int, default=400, help="the first N steps (0: the whole grade)")
    parser.add_argument("grade", nargs=argparse.REMAINDER, help="-- then the grader's arguments")
    args = parser.parse_args(argv)
    if args.analyze:
        calls = json.loads(args.analyze.read_text())
    else:
        grade_args = args.grade[1:] if args.grade[:1] == ["--"] else args.grade
        calls, code = trace(grade_args)
        print(f"grade exit code {code}; {len(calls)} cross-module calls")
        if args.trace:
            args.trace.write_text(json.dumps(calls))
    for steps in (args.steps, 0) if args.steps else (0,):
        found = analyze(calls, steps)
        where = f"first {steps} steps" if steps else "whole grade"
        print(f"{where}: {found['steps']} steps, {found['reentries']} re-entries, "
              f"{found['climbing_reentries']} of them climbing; {found['upward_calls']} upward calls")
        for line in found["upward_distinct"]:  # type: ignore[union-attr]
            print(f"  up: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
