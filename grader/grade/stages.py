"""The stages of a grade, in order: what each takes and what it gives. docs/design.md draws this list, and
grader/tests/test_layering.py checks that each stage's function exists where it says and that the
drawing names every stage. A new stage goes into this list where its input is made, in the package of
its subsystem, taking what it needs as arguments and returning a value the next stage takes.

`grade` runs them lab by lab (prepare, then finish; the next lab's prepare in a thread while this one
finishes, grader/grade/ahead.py); a batch prepares a student's labs in a build slot and finishes them
under the GPU's lock; the late policy runs in a batch only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Stage:
    name: str
    function: str  # module:function
    takes: str
    gives: str
    half: str  # "select", "prepare" (no GPU), "finish" (under the GPU's lock), "publish"


STAGES: tuple[Stage, ...] = (
    Stage("select", "grader.model.labs:select", "lab selectors (03, vector-add)", "list[Lab]", "select"),
    Stage("intake", "grader.intake.stage:take_in", "a submission (folder, archive, files)", "StagedSubmission",
          "select"),
    Stage("test objects", "grader.build.stages:build_test_objects", "labs, Builders", "the contract's objects, notes",
          "prepare"),
    Stage("screen", "grader.inspect.static_checks:screen", "the graded sources, compile_commands.json",
          "Screening (a refusal or the preprocessor's error)", "prepare"),
    Stage("object", "grader.build.stages:build_objects", "labs, Builders (compile limits); beside the screen",
          "BuildResult of each graded object (kept for the labs the screen let through)", "prepare"),
    Stage("inspect", "grader.inspect.static_checks:inspect", "the object, its PTX, the test objects",
          "Inspection (a refusal; technique outcomes)", "prepare"),
    Stage("binaries", "grader.build.stages:build_binaries", "labs that passed, Builders",
          "BuildResult of each test binary", "prepare"),
    Stage("references", "grader.build.stages:build_references", "labs, Builders (the pristine tree)",
          "BuildResult of each reference binary", "prepare"),
    Stage("run", "grader.execute.lab_run:run_lab", "Binary list, Runner, RunRequest",
          "LabRun (tests, messages, GPU facts, the graded binary)", "finish"),
    Stage("sanitize", "grader.execute.sanitizer:sanitize", "the graded binary, Runner, the lab's tools",
          "sanitizer.<tool> results", "finish"),
    Stage("score", "grader.score.scoring:score", "LabResult, technique outcomes, GPU facts",
          "LabResult with tasks, points, penalties, hints", "finish"),
    Stage("answers", "grader.score.answers:check", "the lab, its answers.md (the submission's or the tree's)",
          "LabAnswers (each number right or wrong; no points)", "finish"),
    Stage("profile", "grader.profile.stage:profile_lab", "the graded binary and its reference, the scored perf "
          "tests (grade --profile only)", "LabProfile (ncu metrics, advice; never a grade)", "finish"),
    Stage("assemble", "grader.grade.pipeline:assemble", "LabResult list, the runner's notes", "Results", "publish"),
    Stage("late policy", "grader.course.policy:apply_course", "Results, a course file, submission times",
          "Results with late records (a batch only)", "publish"),
    Stage("redact", "grader.model.hidden:redact", "Results, hidden visibility", "what a student may see", "publish"),
    Stage("render", "grader.report:write_reports", "Results", "results.json, HTML, JUnit, LMS files, console",
          "publish"),
)
