"""The mutation gate: how many realistic bugs a lab's tests catch, and whether correct alternatives
keep every correctness point (`python3 -m grader mutants`).

Each lab keeps its suite beside its reference, in solutions/NN-slug/mutants/: one unified diff per
mutant against the solution file, with a header above the diff:

    # kind: bug            a single realistic bug ("correct": a correct alternative solution)
    # task: grid-stride    the lab.toml task it belongs to
    # what: the guard is i <= n, so the last thread writes one element past the end
    --- solutions/03-vector-add/vector_add.cu
    +++ guard-off-by-one/vector_add.cu
    @@ ...

`check_labs` (no GPU: part of `make test`) proves every patch still applies, changes the file and
names a real task. `run_mutants` grades each lab's mutants as a class with `grader batch` beside the
reference itself, and judges each row from its results.json: a bug is caught when it lost correctness
points (a compile error is counted apart: students ship code that compiles); a correct alternative
must keep all of them. Perf points are not judged here: a slow but correct kernel is not a bug.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence, TextIO

from grader.model.labs import Lab
from grader.authoring.patching import PatchError, apply_patch

KINDS = ("bug", "correct")
MIN_BUGS = 12  # per lab (issue 12's bar)
MIN_CORRECT = 3
CAUGHT_GOAL = 0.95  # of a lab's bug mutants
REFERENCE_ID = "00-reference"  # the batch row of the unmodified solution
_HEADER = re.compile(r"^#\s*(kind|task|what|cause)\s*:\s*(.*?)\s*$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class MutantError(ValueError):
    """A mutant file that is malformed or no longer fits its lab."""


@dataclass(frozen=True)
class Mutant:
    lab: str  # the lab's directory name
    name: str  # the patch's file name without .patch
    kind: str  # "bug" or "correct"
    task: str
    what: str
    path: Path
    cause: str = ""  # a bug's planted cause (grader/score/causes.py): what its report should name first

    @property
    def student(self) -> str:
        """Its row in the batch (folder names sort the reference first)."""
        return f"{self.kind}-{self.name}"


def mutants_dir(lab: Lab) -> Path:
    return lab.solution_dir / "mutants"


def parse_mutant(lab: Lab, path: Path) -> Mutant:
    """A mutant's header; MutantError names the file and what is wrong."""
    fields: dict[str, str] = {}
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("---"):
            break
        m = _HEADER.match(line)
        if m:
            fields[m.group(1)] = m.group(2)
    name = path.name.removesuffix(".patch")
    rel = f"{lab.name}/mutants/{path.name}"
    if not _NAME.match(name):
        raise MutantError(f"{rel}: name it in lower-case letters, digits and dashes")
    missing = [k for k in ("kind", "task", "what") if not fields.get(k)]
    if missing:
        raise MutantError(f"{rel}: the header lacks {', '.join(f'# {k}:' for k in missing)}")
    if fields["kind"] not in KINDS:
        raise MutantError(f"{rel}: kind is {fields['kind']!r}; it must be one of {', '.join(KINDS)}")
    if fields["kind"] == "bug" and not fields.get("cause"):
        raise MutantError(f"{rel}: a bug's header needs # cause: (the id of what it plants, declared in a "
                          "[causes] table of the lab's hints.toml or the grader's)")
    return Mutant(lab.name, name, fields["kind"], fields["task"], fields["what"], path, fields.get("cause", ""))


def load_mutants(lab: Lab) -> list[Mutant]:
    folder = mutants_dir(lab)
    return [parse_mutant(lab, p) for p in sorted(folder.glob("*.patch"))] if folder.is_dir() else []


def mutated_source(lab: Lab, mutant: Mutant) -> str:
    """The solution file with the mutant's change applied (PatchError when it no longer fits)."""
    file = lab.student_files[0]
    base = (lab.solution_dir / file).read_text()
    return apply_patch(base, mutant.path.read_text(), f"{lab.name}/mutants/{mutant.path.name}")


@dataclass
class LabCheck:
    lab: str
    bugs: int = 0
    correct: int = 0
    problems: list[str] = field(default_factory=list)


def check_lab(lab: Lab, minimum: bool = True) -> LabCheck:
    """Without a GPU: every mutant is well formed, names a task of lab.toml, still applies and changes
    the file; with minimum, the lab has at least MIN_BUGS bugs and MIN_CORRECT correct alternatives."""
    from grader.score import causes

    out = LabCheck(lab.name)
    tasks = {t.id for t in lab.tasks}
    try:
        known = causes.declared(lab.path)
    except causes.CausesError as err:
        out.problems.append(str(err))
        known = {}
    base = (lab.solution_dir / lab.student_files[0]).read_text() if lab.solution_dir.is_dir() else ""
    folder = mutants_dir(lab)
    for path in sorted(folder.glob("*.patch")) if folder.is_dir() else []:
        try:
            mutant = parse_mutant(lab, path)
            if mutant.task not in tasks:
                raise MutantError(f"{lab.name}/mutants/{path.name}: task {mutant.task!r} is not a task of lab.toml "
                                  f"({', '.join(sorted(tasks))})")
            if mutant.kind == "bug" and known and mutant.cause not in known:
                raise MutantError(f"{lab.name}/mutants/{path.name}: cause {mutant.cause!r} is declared in no "
                                  f"[causes] table (labs/{lab.name}/hints.toml or grader/score/hints.toml)")
            if mutated_source(lab, mutant) == base:
                raise MutantError(f"{lab.name}/mutants/{path.name}: the patch changes nothing")
        except (MutantError, PatchError) as err:
            out.problems.append(str(err))
            continue
        if mutant.kind == "bug":
            out.bugs += 1
        else:
            out.correct += 1
    if minimum and out.bugs < MIN_BUGS:
        out.problems.append(f"{lab.name}: {out.bugs} bug mutant(s); a lab needs at least {MIN_BUGS}")
    if minimum and out.correct < MIN_CORRECT:
        out.problems.append(f"{lab.name}: {out.correct} correct alternative(s); a lab needs at least {MIN_CORRECT}")
    return out


def format_checks(checks: list[LabCheck]) -> str:
    lines = []
    for c in checks:
        mark = "ok" if not c.problems else "!!"
        lines.append(f"  {mark} {c.lab}: {c.bugs} bug mutant(s), {c.correct} correct alternative(s)")
        lines += [f"     {p}" for p in c.problems]
    bad = sum(bool(c.problems) for c in checks)
    lines.append(f"mutants: {len(checks) - bad} of {len(checks)} lab(s) ok")
    return "\n".join(lines)


# --- grading them -----------------------------------------------------------------------------------


def write_submissions(lab: Lab, mutants: list[Mutant], dest: Path) -> None:
    """One submission folder per mutant, and the reference's own as REFERENCE_ID, the way a class hands
    them in: dest/<student>/labs/NN-slug/<file>.cu."""
    if dest.exists():
        shutil.rmtree(dest)
    file = lab.student_files[0]
    rows = [(REFERENCE_ID, (lab.solution_dir / file).read_text())]
    rows += [(m.student, mutated_source(lab, m)) for m in mutants]
    for student, body in rows:
        target = dest / student / "labs" / lab.name / file
        target.parent.mkdir(parents=True)
        target.write_text(body)


@dataclass
class Verdict:
    mutant: str
    kind: str
    task: str
    what: str
    status: str  # "caught" | "missed" | "full" | "lost points" | "compile error" | "not graded"
    correctness_earned: float | None = None
    correctness_points: float | None = None
    failed: list[str] = field(default_factory=list)  # what caught it: failed tests, tasks or findings

    @property
    def ok(self) -> bool:
        return self.status in ("caught", "full")


def correctness(results: dict[str, Any], lab: str) -> tuple[float, float, list[str], bool] | None:
    """(earned, points, what failed, compiled) of the lab's correctness tasks in a results.json."""
    for entry in results.get("labs", []):
        if entry.get("name") != lab:
            continue
        tasks = entry.get("tasks", [])
        earned = sum(float(t.get("earned", 0) or 0) for t in tasks)
        points = sum(float(t.get("points", 0) or 0) for t in tasks)
        failed = [t["name"] for t in entry.get("tests", [])
                  if t.get("status") in ("failed", "not_run") and t.get("kind") != "perf"]
        compiled = not any(b.get("target", "").endswith(("_student", "_student_object", "_student_code"))
                           and not b.get("ok", True) for b in entry.get("builds", []))
        return earned, points, failed, compiled
    return None


def ungraded(results: dict[str, Any], lab: str) -> str:
    """Why the lab's tests could not decide anything ('' when they could): no GPU, or a GPU that stopped
    working. Points lost then say nothing about the mutant, so it is neither caught nor missed."""
    if (results.get("run") or {}).get("gpu_available") is False:
        return "not graded (no GPU)"
    for entry in results.get("labs", []):
        if entry.get("name") == lab:
            texts = [t.get("message") or "" for t in entry.get("tests", [])] + list(entry.get("messages", []))
            if any("GPU unhealthy" in text for text in texts):
                return "not graded (GPU unhealthy)"
    return ""


def judge(mutant: Mutant, results: dict[str, Any] | None) -> Verdict:
    v = Verdict(mutant.name, mutant.kind, mutant.task, mutant.what, "not graded")
    got = correctness(results, mutant.lab) if results else None
    if got is None:
        return v
    why = ungraded(results, mutant.lab)  # results is there: got came from it
    if why:
        v.status = why
        return v
    earned, points, failed, compiled = got
    v.correctness_earned, v.correctness_points, v.failed = earned, points, failed[:5]
    if not compiled:
        v.status = "compile error"
    elif mutant.kind == "bug":
        v.status = "caught" if earned < points - 1e-6 else "missed"
    else:
        v.status = "full" if earned >= points - 1e-6 else "lost points"
    return v


@dataclass
class LabRun:
    lab: str
    reference: str  # "full" when the unmodified solution kept every correctness point
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def bugs(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.kind == "bug"]

    @property
    def alternatives(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.kind == "correct"]

    @property
    def caught(self) -> int:
        return sum(v.status == "caught" for v in self.bugs)

    @property
    def rate(self) -> float:
        counted = [v for v in self.bugs if v.status in ("caught", "missed")]
        return self.caught / len(counted) if counted else 0.0

    @property
    def ok(self) -> bool:
        return (self.reference == "full" and self.rate >= CAUGHT_GOAL
                and all(v.status == "full" for v in self.alternatives)
                and all(v.status in ("caught", "missed") for v in self.bugs))


def load_results(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def judge_lab(lab: Lab, mutants: list[Mutant], batch_out: Path) -> LabRun:
    reference = load_results(batch_out / REFERENCE_ID / "results.json")
    got = correctness(reference, lab.name) if reference else None
    why = ungraded(reference, lab.name) if got is not None else ""
    ref = "not graded" if got is None else why or ("full" if got[0] >= got[1] - 1e-6 else f"{got[0]:g}/{got[1]:g}")
    run = LabRun(lab.name, ref)
    run.verdicts = [judge(m, load_results(batch_out / m.student / "results.json")) for m in mutants]
    return run


def format_runs(runs: list[LabRun]) -> str:
    header = f"{'lab':<24} {'bugs caught':>12} {'rate':>6} {'correct alternatives':>22}  reference"
    lines = [header, "-" * len(header)]
    for r in runs:
        bugs = r.bugs
        counted = [v for v in bugs if v.status in ("caught", "missed")]
        alt_full = sum(v.status == "full" for v in r.alternatives)
        lines.append(f"{r.lab:<24} {f'{r.caught}/{len(counted)}':>12} {r.rate * 100:5.0f}% "
                     f"{f'{alt_full}/{len(r.alternatives)} full':>22}  {r.reference}")
    for r in runs:
        for v in r.verdicts:
            if v.ok:
                continue
            score = (f" ({v.correctness_earned:g}/{v.correctness_points:g} correctness points)"
                     if v.correctness_points is not None else "")
            lines.append(f"  {r.lab} {v.kind} {v.mutant} [{v.task}]: {v.status}{score} - {v.what}")
            if v.status == "lost points" and v.failed:
                lines.append(f"      failed: {', '.join(v.failed)}")
    total_bugs = sum(len([v for v in r.bugs if v.status in ('caught', 'missed')]) for r in runs)
    total_caught = sum(r.caught for r in runs)
    lines.append(f"mutation: {total_caught}/{total_bugs} bug mutants caught; "
                 f"{sum(r.ok for r in runs)} of {len(runs)} lab(s) at the goal "
                 f"(>= {CAUGHT_GOAL:.0%} caught, every correct alternative at full correctness points)")
    return "\n".join(lines)


def write_json(runs: list[LabRun], path: Path) -> None:
    data = [{"lab": r.lab, "reference": r.reference, "caught": r.caught, "rate": r.rate, "ok": r.ok,
             "verdicts": [asdict(v) for v in r.verdicts]} for r in runs]
    path.write_text(json.dumps(data, indent=2) + "\n")


def lab_cost(lab: Lab, mutants: int) -> float:
    """A rough price for grading one lab's mutants: every mutant and the reference is a run, and where
    racecheck is among the lab's sanitizer tools the runs that pass (reference, alternatives, racy
    bugs) take several times longer under it."""
    tools = lab.sanitizer.get("tools", ()) if isinstance(lab.sanitizer, dict) else ()
    return (mutants + 1) * (3.0 if "racecheck" in tools else 1.0)


def plan_lanes(labs: list[Lab], costs: dict[str, float], lanes: int) -> list[list[Lab]]:
    """Labs spread over lanes (one per GPU), dearest first onto the lane with the least so far, each
    lane's labs then in lab order: the whole gate ends about when its dearest lab does."""
    groups: list[list[Lab]] = [[] for _ in range(max(1, lanes))]
    load = [0.0] * len(groups)
    for lab in sorted(labs, key=lambda lab: (-costs[lab.name], lab.name)):
        i = min(range(len(groups)), key=lambda k: (load[k], k))
        groups[i].append(lab)
        load[i] += costs[lab.name]
    return [sorted(g, key=lambda lab: lab.name) for g in groups if g]


def run_mutants(root: Path, labs: list[Lab], out: Path, *, stdout: TextIO, batch: Any,
                lanes: Sequence[dict[str, Any]] | None = None, **batch_options: Any) -> list[LabRun]:
    """Grade each lab's mutants beside its reference with batch (grader.course.batch.runner.run_batch, or a stand-in
    in tests) into out/NN-slug/, and judge them. lanes: batch options per lane (a GPU, its own work
    folder and build slots); with more than one, the labs are spread over them (plan_lanes) and the
    lanes grade side by side, each lab by lab."""
    suites = {lab.name: load_mutants(lab) for lab in labs}
    for lab in labs:
        if not suites[lab.name]:
            stdout.write(f"{lab.name}: no mutants (solutions/{lab.name}/mutants/)\n")
    graded = [lab for lab in labs if suites[lab.name]]
    order = {lab.name: i for i, lab in enumerate(graded)}
    done: dict[str, LabRun] = {}
    lock = threading.Lock()

    def grade(lab: Lab, options: dict[str, Any]) -> None:
        mutants = suites[lab.name]
        subs = out / lab.name / "submissions"
        write_submissions(lab, mutants, subs)
        with lock:
            where = f" on GPU {options['gpus'][0].index}" if len(options.get("gpus") or ()) == 1 else ""
            stdout.write(f"{lab.name}: grading {len(mutants)} mutant(s) and the reference{where}\n")
            stdout.flush()
        batch(root, subs, out / lab.name / "graded", [lab.name], **options)
        run = judge_lab(lab, mutants, out / lab.name / "graded")
        with lock:
            done[lab.name] = run
            # The labs so far, for whoever watches a long run (the whole table comes at the end).
            so_far = sorted(done.values(), key=lambda r: order[r.lab])
            (out / "mutation.partial.txt").write_text(format_runs(so_far) + "\n")

    lanes = list(lanes or [{}])
    if len(lanes) == 1 or len(graded) <= 1:
        for lab in graded:
            grade(lab, {**batch_options, **lanes[0]})
    else:
        costs = {lab.name: lab_cost(lab, len(suites[lab.name])) for lab in graded}
        groups = plan_lanes(graded, costs, len(lanes))
        for lane, group in zip(lanes, groups):
            stdout.write(f"lane {', '.join(str(d.index) for d in lane.get('gpus') or ()) or '-'}: "
                         f"{' '.join(lab.name for lab in group)}\n")

        def run_lane(lane: dict[str, Any], group: list[Lab]) -> None:
            for lab in group:
                grade(lab, {**batch_options, **lane})

        with ThreadPoolExecutor(max_workers=len(groups)) as pool:
            futures = [pool.submit(run_lane, lane, group) for lane, group in zip(lanes, groups)]
            for future in futures:
                future.result()  # a lane's error ends the gate, as it would have one lab at a time
    return [done[lab.name] for lab in graded if lab.name in done]
