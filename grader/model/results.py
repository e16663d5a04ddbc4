"""The versioned result model: gtest JSON is parsed into these, saved as results.json, and every
report renders from them (never from compiler or test stdout)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from grader.model.answers import LabAnswers
from grader.model.profile import LabProfile

SCHEMA_VERSION = 2
# Versions this grader reads. 2 added LabResult.late (the late policy of a course file, grader/course/policy.py);
# a version 1 file is a version 2 file without it.
READABLE_VERSIONS = (1, 2)


class ResultsError(Exception):
    """results.json is missing, corrupt, or of an unknown schema."""


class Status(str, Enum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"  # the test ran and skipped itself (no GPU, small mode, perf of an incorrect function)
    NOT_RUN = "not_run"  # the test exists but produced no result (build failed, binary crashed before it, ...)


class Category(str, Enum):
    """Why a test failed or did not run. One per failure; hints are keyed to these (grader/score/hints.toml)."""

    COMPILE_ERROR = "compile_error"
    LINK_ERROR = "link_error"
    FORBIDDEN_CALL = "forbidden_call"
    TECHNIQUE_MISSING = "technique_missing"
    WRONG_ANSWER = "wrong_answer"
    CUDA_ERROR = "cuda_error"
    CRASH = "crash"
    TIMEOUT = "timeout"
    SANITIZER = "sanitizer"
    NO_GPU = "no_gpu"
    HARNESS = "harness"  # results missing or unreadable for another reason


@dataclass
class PerfSeries:
    name: str  # "impl", a library ("thrust", "cub", "cublas", "memcpy"), or another variant
    median_ms: float
    min_ms: float = 0.0
    mean_ms: float = 0.0
    noise_pct: float = 0.0
    samples: int = 0
    tail_ms: float = 0.0  # median time from the stop event to the device being idle (work left running)
    calls: int = 0  # calls made, warm-up ones included
    verified: int = -1  # calls whose output the test checked right (-1: the test checks none)


@dataclass
class Perf:
    metric: str  # "GB/s", "TFLOP/s", "Gkeys/s" or "ms"
    work: float  # bytes / flops / keys per call (0 for "ms")
    variants: list[PerfSeries]
    baseline: str | None = None  # the library variant the lab compares against
    label: str = ""
    floor_ms: float | None = None  # practical floor (e.g. bytes at the measured copy throughput)
    physical_floor_ms: float | None = None  # the test's own hardware floor, when the grader cannot derive one
    reference: PerfSeries | None = None  # the reference solution's "impl", measured in the same run
    points: float = 0.0
    earned: float = 0.0
    implausible: str = ""  # why the timing cannot be believed (grader/score/perfcheck.py); it then earns nothing

    def series(self, name: str) -> PerfSeries | None:
        return next((v for v in self.variants if v.name == name), None)

    @property
    def impl(self) -> PerfSeries | None:
        return self.series("impl")

    def rate(self, s: PerfSeries | None) -> float | None:
        """The series' value in the metric (a time for 'ms')."""
        if s is None or s.median_ms <= 0:
            return None
        if self.metric == "ms" or self.work <= 0:
            return s.median_ms
        scale = 1e12 if self.metric == "TFLOP/s" else 1e9
        return self.work / (s.median_ms * 1e-3) / scale

    def speed_ratio(self, other: PerfSeries | None) -> float | None:
        """How fast impl is relative to other: other_time / impl_time (> 1 means impl is faster)."""
        impl = self.impl
        if impl is None or other is None or impl.median_ms <= 0:
            return None
        return other.median_ms / impl.median_ms

    @property
    def ratio_to_reference(self) -> float | None:
        return self.speed_ratio(self.reference)

    @property
    def ratio_to_baseline(self) -> float | None:
        return self.speed_ratio(self.series(self.baseline)) if self.baseline else None

    @property
    def headline_ratio(self) -> float | None:
        """The ratio a summary leads with: to the library baseline (thrust, CUB, cuBLAS, memcpy, the empty
        kernel), else over the serial version; None when the test times neither."""
        if self.baseline and self.series(self.baseline) is not None:
            return self.ratio_to_baseline
        serial = self.series("serial")
        return self.speed_ratio(serial) if serial is not None else None


def is_perf_suite(suite: str) -> bool:
    """Suites named ...Perf hold perf tests. 'Prefix/ReducePerf' and typed 'ReducePerf/0' count too."""
    parts = [p for p in suite.split("/") if not p.isdigit()]
    return bool(parts) and parts[-1].endswith("Perf")


def test_kind(name: str) -> str:
    """"perf" for a test of a perf suite, else "correctness"."""
    return "perf" if is_perf_suite(name.split(".", 1)[0]) else "correctness"


@dataclass
class TestResult:
    name: str  # "Suite.Test/param", as gtest names it
    status: Status
    kind: str = "correctness"  # "correctness" or "perf" (suite name ends in "Perf")
    binary: str = ""  # "student", "solution", "hidden"
    task: str | None = None
    duration_s: float = 0.0
    message: str = ""  # failure text, skip reason, or why it did not run
    category: Category | None = None
    hint: str = ""
    properties: dict[str, str] = field(default_factory=dict)
    perf: Perf | None = None
    visibility: str = ""  # hidden binary's tests: "hidden", "after_due_date" or "visible" (grader/model/hidden.py)


@dataclass
class BuildResult:
    target: str  # "lab03_student"
    ok: bool
    seconds: float = 0.0
    category: Category | None = None
    log: str = ""  # compiler output, truncated
    message: str = ""  # one line: what went wrong


@dataclass
class CheckpointScore:
    """A step of a task, as the report shows it: how many of its tests passed."""

    title: str
    passed: int
    total: int
    failed: int | None = None  # of total, the rest not run (a crash before them, the time limit); None: unknown

    @property
    def ok(self) -> bool:
        return self.total > 0 and self.passed == self.total

    @property
    def state(self) -> str:
        """"passed", "failed" (a test of it failed), or "not run" (none failed; some or all did not run)."""
        if self.ok:
            return "passed"
        if self.failed or (self.failed is None and self.total):  # a results.json from before 0.7.0: no count
            return "failed"
        return "not run"


@dataclass
class TaskScore:
    id: str
    title: str
    points: float
    earned: float
    challenge: bool = False
    tests_passed: int = 0
    tests_total: int = 0
    perf_points: float = 0.0
    perf_earned: float = 0.0
    notes: list[str] = field(default_factory=list)  # e.g. technique missing
    checkpoints: list[CheckpointScore] = field(default_factory=list)  # a big all-or-nothing task's steps


@dataclass
class LateRecord:
    """How a course's late policy (grader/course/policy.py) treated one lab's submission. The lab's score is
    the final score; raw_score is what the tests earned before the penalty."""

    due: str  # ISO 8601: the student's due date, extension included ("" when the lab has none)
    submitted: str  # ISO 8601 ("" when no trustworthy time was found)
    source: str  # where `submitted` came from: "git commit", "archive mtime", "submitted_at column", ""
    raw_score: float
    penalty: float = 0.0  # points taken off
    penalty_percent: float = 0.0  # of raw_score, after the cap
    late_seconds: float = 0.0  # after the due date (0 when on time, or within the grace period)
    late_days_used: int = 0  # course late days this lab spent
    late_days_left: int = 0  # what the student has left after this lab
    charged: int = 0  # late days or hours the penalty was charged for, after the late days
    unit: str = "day"  # "day" or "hour": what one penalty step is
    rate_percent: float = 0.0  # penalty per unit, in percent of the raw score
    cap_percent: float = 100.0
    grace_minutes: float = 0.0
    extension: str = ""  # the extension that moved `due` ("2 days", "until ...") or ""
    reveal_hidden_after: str = ""  # ISO 8601: when hidden tests of visibility after_due_date show


@dataclass
class LabResult:
    number: int
    name: str  # "03-vector-add"
    title: str
    max_score: float
    score: float = 0.0
    builds: list[BuildResult] = field(default_factory=list)
    tests: list[TestResult] = field(default_factory=list)
    tasks: list[TaskScore] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)  # lab-level notes (build failed, crashed, ...)
    late: LateRecord | None = None  # a course file's late policy (schema 2; omitted when None)
    # Wall seconds per stage, for bench/grading_time.py: "prepare", "run <target>", "reference <target>",
    # "sanitizer.<tool>", "score". Timings, like a test's duration_s: never part of a grade.
    seconds: dict[str, float] = field(default_factory=dict)
    # The most host memory each binary's runs held, MiB ("run <target>"): what a lab's limit is set from.
    host_memory_mib: dict[str, float] = field(default_factory=dict)
    profile: LabProfile | None = None  # grade --profile: Nsight Compute's view of the timed kernels
    answers: LabAnswers | None = None  # answers.md: the chapter's questions, numbers checked (no points)

    @property
    def passed(self) -> int:
        return sum(t.status is Status.PASSED for t in self.tests)

    @property
    def failed(self) -> int:
        return sum(t.status is Status.FAILED for t in self.tests)

    @property
    def skipped(self) -> int:
        return sum(t.status is Status.SKIPPED for t in self.tests)

    @property
    def not_run(self) -> int:
        return sum(t.status is Status.NOT_RUN for t in self.tests)


@dataclass
class RunInfo:
    started: str  # ISO 8601
    finished: str = ""
    mode: str = "student"  # "student" (grading the student files) or "solution" (the reference)
    submission: str = ""  # where the student files came from
    commit: str = ""
    host: str = ""
    grader_version: str = ""
    toolkit: str = ""  # nvcc --version, last line
    gpu: dict[str, str] = field(default_factory=dict)  # the gtest environment's gpu_* properties
    gpu_available: bool = False
    gpu_reason: str = ""  # why not, when unavailable
    sandboxed: bool = False
    notes: list[str] = field(default_factory=list)


@dataclass
class Results:
    run: RunInfo
    labs: list[LabResult] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION

    @property
    def score(self) -> float:
        return sum(lab.score for lab in self.labs)

    @property
    def max_score(self) -> float:
        return sum(lab.max_score for lab in self.labs)

    def to_dict(self) -> dict[str, Any]:
        data = _plain(asdict(self))
        for lab in data["labs"]:
            if lab.get("late") is None:
                lab.pop("late", None)  # a run without a course file reads as it did in schema 1
            for key in ("profile", "answers"):  # absent when there is none: older readers see what they knew
                if lab.get(key) is None:
                    lab.pop(key, None)
        return data

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        tmp.replace(path)  # never leave a half-written results.json behind

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Results:
        if not isinstance(data, dict):
            raise ResultsError("results.json does not hold a JSON object")
        version = data.get("schema_version")
        if version not in READABLE_VERSIONS:
            raise ResultsError(f"results.json has schema_version {version!r}; this grader reads "
                               f"{', '.join(map(str, READABLE_VERSIONS))}")
        try:
            return cls(
                run=RunInfo(**data["run"]),
                labs=[_lab_from_dict(lab) for lab in data.get("labs", [])],
                schema_version=SCHEMA_VERSION,  # read as the current schema: a version 1 file has no late records
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ResultsError(f"results.json is malformed: {err}") from None

    @classmethod
    def load(cls, path: Path) -> Results:
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ResultsError(f"{path}: no such file") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ResultsError(f"{path}: not valid JSON ({err})") from None
        return cls.from_dict(data)


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _perf_from_dict(d: dict[str, Any] | None) -> Perf | None:
    if d is None:
        return None
    d = dict(d)
    d["variants"] = [PerfSeries(**v) for v in d.get("variants", [])]
    d["reference"] = PerfSeries(**d["reference"]) if d.get("reference") else None
    return Perf(**d)


def _test_from_dict(d: dict[str, Any]) -> TestResult:
    d = dict(d)
    d["status"] = Status(d["status"])
    d["category"] = Category(d["category"]) if d.get("category") else None
    d["perf"] = _perf_from_dict(d.get("perf"))
    return TestResult(**d)


def _lab_from_dict(d: dict[str, Any]) -> LabResult:
    d = dict(d)
    d["builds"] = [
        BuildResult(**{**b, "category": Category(b["category"]) if b.get("category") else None})
        for b in d.get("builds", [])
    ]
    d["tests"] = [_test_from_dict(t) for t in d.get("tests", [])]
    d["tasks"] = [TaskScore(**{**t, "checkpoints": [CheckpointScore(**c) for c in t.get("checkpoints", [])]})
                  for t in d.get("tasks", [])]
    d["late"] = LateRecord(**d["late"]) if d.get("late") else None
    d["profile"] = LabProfile.from_dict(d["profile"]) if d.get("profile") else None
    d["answers"] = LabAnswers.from_dict(d["answers"]) if d.get("answers") else None
    return LabResult(**d)
