#!/usr/bin/env python3
"""What a student with a realistic bug reads first: for each lab's caught bug mutants (`grader mutants`
keeps each mutant's results.json in OUT/NN-slug/graded/<mutant>/), how the first failure the report lists
is explained. Issue 25's per-lab diagnosis table; ci/gpu-check prints it after the mutation gate.

    bench/diagnosis_table.py build/gpu-check-work/mutants            the table
    bench/diagnosis_table.py OUT --json table.json                    also as JSON
    bench/diagnosis_table.py OUT --rehint                             with the hints the tree has now

Per mutant, its first failure entry (grader/report/failures.py's order: sanitizer findings, then the
failures that say where the output is wrong, then the rest) is counted once, in the first of:
  lab hint      a hint from the lab's own hints.toml (its author's words for that failure)
  pattern       a wrong answer described in the lab's geometry (grader/score/mismatch.py), with a grader hint
  sanitizer     a sanitizer finding that names a kernel and a source line
  grader hint   a specific hint of grader/score/hints.toml (one with a match or a signature)
  default       only the category's default hint
and, where the mutant's header names the cause it plants (`# cause:`, grader/score/causes.py), whether
that first failure's hint names it (the hint's `causes`): the share of caught bugs diagnosed right, per
lab, against issue 25's goal of 80 %. The mutants whose first diagnosis names another cause are listed.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.model.results import Category, Results, ResultsError  # noqa: E402
from grader.report.failures import group_failures  # noqa: E402
from grader.score import hints, mismatch  # noqa: E402

KINDS = ("lab hint", "pattern", "sanitizer", "grader hint", "default")
GOAL = 0.8  # issue 25: the share of caught bugs whose first diagnosis names the planted cause


@dataclass
class LabRow:
    kinds: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    labelled: int = 0  # caught bugs whose mutant names its cause
    right: int = 0  # ... and whose first hint names that cause
    misses: list[str] = field(default_factory=list)  # "mutant: planted cause -> what the first hint names"
    cut_short: int = 0  # caught bugs graded only to their first failure (a gate without --diagnose)
    bugs: int = 0  # the lab's bug mutants; those without results were not graded (a gate cut short)
    graded: int = 0  # ... of which have a results.json

    @property
    def share(self) -> float | None:
        return self.right / self.labelled if self.labelled else None


def named_causes(shown: str, known: list[hints.Hint]) -> set[str]:
    """The causes the shown hint names: those of every hint whose text it ends with (a pattern's
    description may come first)."""
    return {c for h in known if h.text and shown.endswith(h.text) for c in h.causes}



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


def rehint(result, lab) -> None:
    """Give result's failures the hints the tree's hints.toml files give them now (not those recorded when
    it was graded): a hint's author measures a change against results recorded on a GPU, without one."""
    for t in result.tests:
        t.hint = ""
    hints.annotate(result, hints.hints_for_lab(lab.path), geometry=lab.geometry)


def table(out: Path, root: Path = ROOT, fresh_hints: bool = False) -> dict[str, LabRow]:
    """{lab: LabRow} over the caught bug mutants under out (the mutation gate's --out); fresh_hints: as
    the tree's hints would explain them now (rehint)."""
    from grader.authoring.mutation import MutantError, load_mutants
    from grader.model.labs import discover

    labs = {lab.name: lab for lab in discover(root)}
    specific = {h.text for h in hints.load_hints() if h.match is not None or h.signature}
    rows: dict[str, LabRow] = {}
    for lab_out in sorted(p for p in out.iterdir() if (p / "graded").is_dir()):
        lab = labs.get(lab_out.name)
        if lab is None:
            continue
        own = lab.path / hints.LAB_HINTS
        lab_texts = {h.text for h in hints.parse_hints(own.read_text())} if own.is_file() else set()
        known = list(hints.hints_for_lab(lab.path))
        try:
            mutants = load_mutants(lab)
        except MutantError:
            mutants = []
        planted = {m.student: m.cause for m in mutants}
        row = LabRow(bugs=sum(m.kind == "bug" for m in mutants))
        for path in sorted((lab_out / "graded").glob("*/results.json")):
            if not path.parent.name.startswith("bug-"):  # the reference and the correct alternatives
                continue
            row.graded += 1
            try:
                result = next(iter(Results.load(path).labs), None)
            except ResultsError:
                continue
            if result is not None and fresh_hints:
                rehint(result, lab)
            groups = group_failures(result) if result is not None else []
            if not groups:
                continue  # missed: the gate's own table names it
            first = groups[0].test
            if any(t.message.startswith("not run:") and ("decides the mutation gate" in t.message
                                                          or "a correctness test failed already" in t.message)
                   for t in result.tests):
                row.cut_short += 1
            row.kinds[kind_of(first.hint, first.message, first.category, lab_texts, specific, lab.geometry)] += 1
            cause = planted.get(path.parent.name)
            if cause:
                row.labelled += 1
                named = named_causes(first.hint, known)
                if cause in named:
                    row.right += 1
                else:
                    row.misses.append(f"{path.parent.name.removeprefix('bug-')}: plants {cause}; the first hint "
                                      f"({first.name}) names {', '.join(sorted(named)) or 'no cause'}")
        rows[lab.name] = row
    return rows


def _share(right: int, labelled: int) -> str:
    return f"{right}/{labelled} {100 * right / labelled:3.0f} %" if labelled else "-"


def render(rows: dict[str, LabRow], misses: bool = True) -> str:
    head = f"{'lab':<24}" + "".join(f"{k:>13}" for k in KINDS) + f"{'caught':>9}{'right cause':>15}"
    lines = ["what a caught bug's first failure says (bench/diagnosis_table.py)", head, "-" * len(head)]
    total, right, labelled = dict.fromkeys(KINDS, 0), 0, 0
    for lab, row in rows.items():
        lines.append(f"{lab:<24}" + "".join(f"{row.kinds[k]:>13}" for k in KINDS) + f"{sum(row.kinds.values()):>9}"
                     + f"{_share(row.right, row.labelled):>15}")
        for k in KINDS:
            total[k] += row.kinds[k]
        right, labelled = right + row.right, labelled + row.labelled
    n = sum(total.values())
    lines.append(f"{'all':<24}" + "".join(f"{total[k]:>13}" for k in KINDS) + f"{n:>9}{_share(right, labelled):>15}")
    if n:
        specific = n - total["default"]
        lines.append(f"{specific} of {n} caught bugs ({100 * specific / n:.0f} %) are explained by more than the "
                     "category's default hint")
    below = [lab for lab, row in rows.items() if row.share is not None and row.share < GOAL]
    if labelled:
        lines.append(f"right cause: the first hint names the cause the mutant plants; goal {GOAL:.0%} in every lab"
                     + (f", not met in {', '.join(below)}" if below else ", met"))
    cut = sum(row.cut_short for row in rows.values())
    if cut:
        lines.append(f"{cut} of {n} caught bugs were graded only up to their first failure (a gate run without "
                     "--diagnose): their first entry is not what a student's full report shows first")
    partial = [f"{lab} {row.graded} of {row.bugs}" for lab, row in rows.items() if row.graded < row.bugs]
    if partial:
        lines.append("bug mutants with results (the others were not graded, so they are not in the table): "
                     + ", ".join(partial))
    if misses:
        for lab, row in rows.items():
            for miss in row.misses:
                lines.append(f"  {lab} {miss}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="the mutation gate's --out folder")
    ap.add_argument("--json", type=Path, help="also write the table as JSON")
    ap.add_argument("--rehint", action="store_true",
                    help="explain each failure with the hints the tree has now, not those recorded at grading")
    args = ap.parse_args(argv)
    rows = table(args.out, fresh_hints=args.rehint)
    print(render(rows))
    if args.json:
        args.json.write_text(json.dumps({lab: {**asdict(row), "share": row.share} for lab, row in rows.items()},
                                        indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
