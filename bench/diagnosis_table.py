#!/usr/bin/env python3
"""What a student with a realistic bug reads first: for each lab's caught bug mutants (`grader mutants`
keeps each mutant's results.json in OUT/NN-slug/graded/<mutant>/), how the first failure the report lists
is explained. Issue 25's per-lab diagnosis table; ci/gpu-check prints it after the mutation gate.

    bench/diagnosis_table.py build/gpu-check-work/mutants            the table
    bench/diagnosis_table.py OUT --json table.json                    also as JSON

Per mutant, its first failure entry (grader/report/failures.py's order: sanitizer findings, then the
failures that say where the output is wrong, then the rest) is counted once, in the first of:
  lab hint      a hint from the lab's own hints.toml (its author's words for that failure)
  pattern       a wrong answer described in the lab's geometry (grader/score/mismatch.py), with a grader hint
  sanitizer     a sanitizer finding that names a kernel and a source line
  grader hint   a specific hint of grader/score/hints.toml (one with a match or a signature)
  default       only the category's default hint
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.model.results import Category, Results, ResultsError  # noqa: E402
from grader.report.failures import group_failures  # noqa: E402
from grader.score import hints, mismatch  # noqa: E402

KINDS = ("lab hint", "pattern", "sanitizer", "grader hint", "default")



def kind_of(hint: str, message: str, category: Category | None, lab_texts: set[str], specific: set[str],
            geometry: dict[str, int]) -> str:
    if any(t and hint.endswith(t) for t in lab_texts):
        return "lab hint"
    if category is Category.WRONG_ANSWER and mismatch.diagnosis(message, geometry)[1]:
        return "pattern"
    if category is Category.SANITIZER and ".cu:" in message:
        return "sanitizer"
    if any(t and hint.endswith(t) for t in specific):
        return "grader hint"
    return "default"


def table(out: Path, root: Path = ROOT) -> dict[str, dict[str, int]]:
    """{lab: {kind: mutants}} over the caught bug mutants under out (the mutation gate's --out)."""
    from grader.model.labs import discover

    labs = {lab.name: lab for lab in discover(root)}
    specific = {h.text for h in hints.load_hints() if h.match is not None or h.signature is not None}
    rows: dict[str, dict[str, int]] = {}
    for lab_out in sorted(p for p in out.iterdir() if (p / "graded").is_dir()):
        lab = labs.get(lab_out.name)
        if lab is None:
            continue
        own = lab.path / hints.LAB_HINTS
        lab_texts = {h.text for h in hints.parse_hints(own.read_text())} if own.is_file() else set()
        counts = dict.fromkeys(KINDS, 0)
        for path in sorted((lab_out / "graded").glob("*/results.json")):
            if not path.parent.name.startswith("bug-"):  # the reference and the correct alternatives
                continue
            try:
                result = next(iter(Results.load(path).labs), None)
            except ResultsError:
                continue
            groups = group_failures(result) if result is not None else []
            if not groups:
                continue  # missed: the gate's own table names it
            first = groups[0].test
            counts[kind_of(first.hint, first.message, first.category, lab_texts, specific, lab.geometry)] += 1
        rows[lab.name] = counts
    return rows


def render(rows: dict[str, dict[str, int]]) -> str:
    head = f"{'lab':<24}" + "".join(f"{k:>13}" for k in KINDS) + f"{'caught':>9}"
    lines = ["what a caught bug's first failure says (bench/diagnosis_table.py)", head, "-" * len(head)]
    total = dict.fromkeys(KINDS, 0)
    for lab, counts in rows.items():
        lines.append(f"{lab:<24}" + "".join(f"{counts[k]:>13}" for k in KINDS) + f"{sum(counts.values()):>9}")
        for k in KINDS:
            total[k] += counts[k]
    n = sum(total.values())
    lines.append(f"{'all':<24}" + "".join(f"{total[k]:>13}" for k in KINDS) + f"{n:>9}")
    if n:
        specific = n - total["default"]
        lines.append(f"{specific} of {n} caught bugs ({100 * specific / n:.0f} %) are explained by more than the "
                     "category's default hint")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="the mutation gate's --out folder")
    ap.add_argument("--json", type=Path, help="also write the table as JSON")
    args = ap.parse_args(argv)
    rows = table(args.out)
    print(render(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
