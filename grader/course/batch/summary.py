"""What a batch says (grader/course/batch/runner.py): the ETA and the counts of its progress lines, each student's
verdict on them, the last lines on stdout, and the exit code."""

from __future__ import annotations

import math
from collections import Counter
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from grader.host.environment import GpuProbe
from grader.model.errors import Exit

if TYPE_CHECKING:
    from grader.report.outcomes import StudentOutcome


def format_eta(seconds: float | None) -> str:
    """mm:ss, or h:mm:ss from an hour on; '--:--' when unknown."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "--:--"
    total = round(seconds)
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


@dataclass
class Tally:
    total: int
    to_grade: int
    done: int = 0
    graded: int = 0
    started: float = field(default_factory=time.monotonic)

    def eta(self) -> float | None:
        if self.graded == 0:
            return None
        left = self.to_grade - self.graded
        return (time.monotonic() - self.started) / self.graded * left


def _verdict(outcome: StudentOutcome) -> str:
    """A progress line's word on one student: their score, or what stands in for it."""
    from grader.report._format import fmt_points
    from grader.report.standing import COMPILED, GRADED, NOT_COMPILED, compile_state

    status = outcome.status
    results = outcome.results
    if status == GRADED:
        return f"{fmt_points(results.score)}/{fmt_points(results.max_score)}"
    if status in (COMPILED, NOT_COMPILED):
        states = [f"{lab.name} {compile_state(lab)[0]}" for lab in results.labs]
        return f"{status} ({', '.join(states)})" if status == NOT_COMPILED else status
    return status


def batch_exit(outcomes: list[StudentOutcome], compile_only: bool) -> Exit:
    """4 when a row could not be graded for lack of a GPU; for a compile check, 3 unless every
    submission compiled; else 0 (whatever the scores)."""
    from grader.report.standing import COMPILED, MISSING, NOT_GRADED_NO_GPU

    outcomes = [o for o in outcomes if o.status != MISSING]  # a roster student who handed in nothing
    if compile_only:
        return Exit.OK if all(o.status == COMPILED for o in outcomes) else Exit.BUILD
    if any(o.status == NOT_GRADED_NO_GPU for o in outcomes):
        return Exit.ENVIRONMENT
    return Exit.OK


def summary(ordered: list[StudentOutcome], todo: int, kept: int, compile_only: bool, gpu: GpuProbe) -> str:
    """The batch's last lines on stdout: what stands in for a grade first, then the counts."""
    from grader.report._format import fmt_points, gpu_device
    from grader.report.standing import BROKEN, COMPILED, GRADED, NOT_GRADED_NO_GPU

    count = {s: sum(o.status == s for o in ordered) for s in (GRADED, NOT_GRADED_NO_GPU, COMPILED, BROKEN)}
    lines = []
    if compile_only:
        lines.append(f"compile check only: no test was run; {count[COMPILED]} of {len(ordered)} submission(s) "
                     "compiled and passed the static checks")
    elif count[NOT_GRADED_NO_GPU]:
        lines.append(f"NOT GRADED: no GPU ({gpu.reason or 'none found'}): {count[NOT_GRADED_NO_GPU]} of "
                     f"{len(ordered)} submission(s) have no score; run the batch again on a machine with a GPU "
                     "(or pass --compile-only for a compile check)")
    graded = [o.results for o in ordered if o.status == GRADED]
    mean = (f"mean {fmt_points(sum(r.score for r in graded) / len(graded))} over {len(graded)} graded"
            if graded else "no scores")
    lines.append(f"batch: {len(ordered)} student(s): {todo} processed now, {kept} kept, {count[BROKEN]} broken; "
                 f"{mean}")
    per_gpu = Counter(d for d in (gpu_device(o.results.run) for o in ordered if o.results is not None) if d)
    if per_gpu:  # a batch with --gpus
        lines.append("graded per GPU: " + ", ".join(f"{d} {n}" for d, n in sorted(per_gpu.items())))
    return "\n".join(lines)


__all__ = ["Tally", "batch_exit", "format_eta", "summary"]
