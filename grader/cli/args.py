"""Command line of the grader: argparse only; every verb lives in grader/cli/commands.py."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from grader import __version__
from grader.course.batch import merge as batch_merge
from grader.authoring.release_reference import DEFAULT_ARCHS as DEFAULT_REFERENCE_ARCHS
from grader.cli import commands, mutants
from grader.course import similarity
from grader.course.slurm import jobs as slurm_commands
from grader.model.errors import Exit, GraderError
from grader.model.labs import ROOT_ENV, LabError, find_root
from grader.model.progress import Progress

EPILOG = f"""the lab tree: --root DIR, else ${ROOT_ENV}, else the nearest directory from here upwards
whose labs/ holds NN-slug/lab.toml, else the checkout this grader runs from.

exit codes: 0 all passed, 1 test failures (or stale skeletons, or problems `check` found),
2 usage or configuration error, 3 build failure, 4 environment (no toolkit; no GPU where one is needed)"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits 2 on usage errors, as DESIGN.md wants
        self.print_usage(sys.stderr)
        self.exit(Exit.USAGE, f"{self.prog}: error: {message}\n")


def _labs(p: argparse.ArgumentParser) -> None:
    p.add_argument("labs", nargs="*", metavar="LAB", help="lab selectors: 3, 03, vector-add, 03-vector-add (default: all)")


def _build_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", help="CMake preset (default: 'default' with a GPU, 'ci' without)")
    p.add_argument("-j", "--jobs", type=int, help="parallel compile jobs")


def _run_opts(p: argparse.ArgumentParser) -> None:
    _build_opts(p)
    p.add_argument("--solution", action="store_true", help="grade the reference solution instead of the student files")
    p.add_argument("--no-build", dest="build", action="store_false", help="use the binaries already built")
    p.add_argument("--timeout", type=float, dest="timeout_s", help="seconds per test binary run (default: lab.toml)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.add_argument("--profile", action="store_true",
                   help="after the grade, profile the scored perf tests' kernels with Nsight Compute (ncu): "
                        "yours, the reference's and the library's side by side in the report")
    p.add_argument("--submission", type=Path, metavar="PATH",
                   help="grade a submission: a directory (a student's repository), a .zip or .tar.gz, or the student "
                        "file(s) alone; only the student files of PATH/labs/NN-slug/ are staged and built apart")
    p.add_argument("--max-seconds", type=float, dest="max_seconds", metavar="S",
                   help="global time limit of the whole run (default: 1 h plus each lab's timeout)")
    p.add_argument("--sanitizer", type=_tools, dest="sanitizer_tools", metavar="TOOLS",
                   help="compute-sanitizer tools to run, comma-separated (memcheck,racecheck,synccheck,initcheck), "
                        "or 'none' (default: each lab.toml's [sanitizer] tools)")
    p.add_argument("--no-sandbox", dest="sandbox", action="store_false",
                   help="do not run test binaries under bubblewrap even where it is installed")
    _confine_opts(p)
    p.add_argument("--small", action="store_true",
                   help="small sizes only, perf tests off: a quick check, not a full grade (the report says so)")
    p.add_argument("--compile-timeout", type=float, dest="compile_timeout_s", metavar="S",
                   help="seconds a student file may take to compile (default: 120)")


def _confine_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-host-memory", type=float, dest="host_memory_mib", metavar="MIB",
                   help="host memory one test run may use, all its processes together (default: lab.toml, else 32768)")
    p.add_argument("--no-confine", dest="confine", action="store_false",
                   help="run test binaries without the supervisor (no PID namespace, Landlock or memory limit): "
                        "for debugging the harness only, never to grade untrusted code")


def _tools(text: str) -> list[str]:
    tools = [t.strip() for t in text.split(",") if t.strip() and t.strip() != "none"]
    known = ("memcheck", "racecheck", "synccheck", "initcheck")
    bad = [t for t in tools if t not in known]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown tool(s) {', '.join(bad)}; choose from {', '.join(known)} or none")
    return tools


def _reveal(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reveal-hidden", action="store_true",
                   help="show hidden tests whose visibility is after_due_date in full (after the due date)")


def _slurm_parsers(verbs: argparse._SubParsersAction, prog: str) -> None:
    """`batch merge` (the verb batch-merge, see _verb_alias) and `slurm submit|status|resubmit|task`."""
    p = verbs.add_parser("batch-merge", prog=f"{prog} batch merge",
                         help="(batch merge) one class summary and gradebook from the folders of many batches")
    p.add_argument("outs", type=Path, nargs="+", metavar="OUT", help="folders `grader batch` wrote (OUT/<student>/)")
    p.add_argument("--out", dest="dest", type=Path, required=True, help="where class-summary.html and gradebook.csv go")
    p.add_argument("--roster", type=Path, help="who gets a row: a folder of submissions, a file of student ids, or a "
                                               "roster .csv (id, name, email, aliases; default: every student found)")
    p.add_argument("--expect", type=Path, metavar="IDS", help="with a roster .csv: a file of the ids the batches were "
                   "given; one of them with nothing in any OUT is broken (its job died), not missing")
    p.add_argument("--unmatched", type=Path, metavar="TSV", help="submissions matched to nobody before the batches "
                   "ran (<submission> TAB <why> lines): listed as not graded")
    p.add_argument("--title", default="", help="the class summary's title")

    slurm = verbs.add_parser("slurm", help="grade a class on a Slurm cluster: a job array and a merge job")
    sub = slurm.add_subparsers(dest="slurm_verb", required=True, parser_class=_Parser)
    p = sub.add_parser("submit", help="write and submit the sbatch job array and the merge job")
    p.add_argument("submissions", type=Path, metavar="SUBMISSIONS", help="one folder or archive per student")
    _labs(p)
    p.add_argument("--out", type=Path, required=True, help="OUT on a shared filesystem (layout: docs/instructors.md)")
    p.add_argument("--partition", help="the Slurm partition")
    p.add_argument("--gpus-per-task", type=int, default=1, metavar="G", help="GPUs per array task (default 1)")
    p.add_argument("--max-parallel", type=int, metavar="K", help="array tasks at a time (--array=0-N%%K)")
    p.add_argument("--container", metavar="IMAGE", help="run each task in this Apptainer image (apptainer exec --nv)")
    p.add_argument("--shard-size", type=int, default=1, metavar="S", help="students per array task (default 1)")
    p.add_argument("--time", type=int, dest="time_min", metavar="MIN", help="a task's time limit (default: from the labs)")
    p.add_argument("--mem", type=int, dest="mem_mib", metavar="MIB", help="a task's memory (default: from the labs)")
    p.add_argument("--sbatch-arg", action="append", default=[], metavar="ARG",
                   help="another #SBATCH line for both jobs, e.g. --sbatch-arg=--account=cs101 (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="print the scripts and the sbatch command lines; submit nothing")
    _class_files(p)
    p.add_argument("--preset", help="CMake preset of each task's batch (default: 'default' with a GPU, 'ci' without)")
    p.add_argument("-j", "--jobs", type=int, default=1, help="build slots (and CPUs) per task (default 1)")
    p.add_argument("--compile-only", dest="compile_only", action="store_true", help="a compile check (batch --compile-only)")
    p.add_argument("--force", action="store_true", help="each task grades its students even where a grade stands")
    p.add_argument("--timeout", type=float, dest="timeout_s", help="seconds per test binary run (default: lab.toml)")
    p.add_argument("--max-seconds", type=float, dest="max_seconds", metavar="S", help="time limit of each student's grade")
    p.add_argument("--sanitizer", type=_tools, dest="sanitizer_tools", metavar="TOOLS", help="as for batch")
    p.add_argument("--no-sandbox", dest="sandbox", action="store_false", help="as for batch")
    p = sub.add_parser("status", help="the jobs (squeue/sacct) and which students are graded, broken or missing")
    p.add_argument("out", type=Path, metavar="OUT")
    p = sub.add_parser("resubmit", help="a new array over the students without a finished grade, then merge again")
    p.add_argument("out", type=Path, metavar="OUT")
    p.add_argument("--max-parallel", type=int, metavar="K", help="array tasks at a time")
    p.add_argument("--shard-size", type=int, metavar="S", help="students per array task")
    p.add_argument("--force", action="store_true", help="even while earlier jobs are pending or running")
    p.add_argument("--dry-run", action="store_true", help="print the scripts; submit nothing")
    p = sub.add_parser("task", help="(what an array task runs) grade one shard into OUT/tasks/<task>/")
    p.add_argument("out", type=Path, metavar="OUT")
    p.add_argument("--task", type=int, required=True)
    p.add_argument("--work-dir", type=Path, help="where this task builds (default: build/ of the lab tree)")
    _class_files(p, "(default: OUT/slurm's copies, where submit had them)")


def _class_files(p: argparse.ArgumentParser, default: str = "(copied into OUT/slurm/ for the jobs)") -> None:
    p.add_argument("--roster", type=Path, metavar="CSV", help=f"the class, as for batch --roster {default}")
    p.add_argument("--course", type=Path, metavar="TOML", help=f"due dates and the late policy {default}")


def _verb_alias(argv: list[str]) -> list[str]:
    """`batch merge OUT...` is the verb batch-merge (batch's own first argument is a folder)."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] == "--root" else 1
    if argv[i : i + 2] == ["batch", "merge"]:
        return [*argv[:i], "batch-merge", *argv[i + 2 :]]
    return argv


def build_parser() -> argparse.ArgumentParser:
    # the name it was called by: the console script `pip install .` makes, or the module
    prog = "cudalab-grader" if Path(sys.argv[0]).name == "cudalab-grader" else "python3 -m grader"
    parser = _Parser(prog=prog, description="cudalab grader", epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"cudalab grader {__version__}")
    parser.add_argument("--root", help=f"the lab tree (default: ${ROOT_ENV}, else found from the current "
                                       "directory upwards)")
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=_Parser)

    verbs.add_parser("list", help="the labs, with titles and points")

    p = verbs.add_parser("doctor", help="check the toolchain, GoogleTest, the GPU and Python packages")
    p.add_argument("--brief", action="store_true", help="one line about the GPU (for make test)")

    p = verbs.add_parser("build", help="build labs, one target at a time")
    _labs(p)
    _build_opts(p)
    p.add_argument("--all", action="store_true", help="every lab (the default when no LAB is named)")
    p.add_argument("--solution", action="store_true", help="build only the reference binaries")

    p = verbs.add_parser("test", help="build and run lab tests, print the results")
    _labs(p)
    _run_opts(p)

    p = verbs.add_parser("grade", help="build, run, score and write every report")
    _labs(p)
    _run_opts(p)
    p.add_argument("--out", type=Path, help="report directory (default: reports/)")
    _reveal(p)
    cache = p.add_mutually_exclusive_group()
    cache.add_argument("--fresh-reference", dest="reference_cache", action="store_const", const=False,
                       help="time the reference solution in this grade even if it was timed on this GPU before")
    cache.add_argument("--reuse-reference", dest="reference_cache", action="store_const", const=True,
                       help="with --submission: reuse the reference's kept timings as a grade of this tree does "
                            "(only for submissions you trust: their code runs before the reference is read)")

    p = verbs.add_parser("skeleton", help="check or regenerate student skeletons from the solutions")
    _labs(p)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 with a diff when a skeleton is stale")
    mode.add_argument("--write", action="store_true", help="rewrite stale skeletons")

    p = verbs.add_parser("check", help="check each lab's rubric (lab.toml): points, test globs against the built "
                                       "binaries' tests, perf entries, techniques, symbols, sanitizer tools")
    _labs(p)
    p.add_argument("--preset", help="whose binaries list the tests (default: 'default' with a GPU, 'ci' without)")
    p.add_argument("--no-tests", dest="list_tests", action="store_false",
                   help="check lab.toml alone, without listing the built binaries' tests")

    p = verbs.add_parser("mutants", help="the mutation gate: grade each lab's mutants (solutions/NN-slug/mutants/) "
                                         "as a batch and print how many bugs the tests caught")
    _labs(p)
    p.add_argument("--check", action="store_true",
                   help="no GPU needed: check that every mutant is well formed and still applies (make test runs this)")
    p.add_argument("--out", type=Path, default=None, help="where to grade them (default: build/mutants)")
    p.add_argument("-j", "--jobs", type=int,
                   help="parallel build slots (default: two more than the test binaries run at a time)")
    p.add_argument("--preset", help="CMake preset (default: 'default' with a GPU, 'ci' without)")
    p.add_argument("--timeout", type=float, dest="timeout_s", help="seconds per test binary run (default: lab.toml)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines from the batches")
    p.add_argument("--gpu-runs", type=int, default=3,
                   help="test binaries on the GPU at a time (default 3: correctness runs need no quiet GPU)")
    p.add_argument("--gpus", metavar="all|0,1",
                   help="grade on these GPUs (nvidia-smi's indices), each running --gpu-runs test binaries at a time")
    p.add_argument("--diagnose", action="store_true",
                   help="grade each bug as a student's grade runs (every test, the sanitizers after a failure), so "
                        "that its report shows what a student would read first (bench/diagnosis_table.py); slower")

    p = verbs.add_parser("report", help="render every report from a results.json")
    p.add_argument("--from", dest="source", type=Path, required=True, help="a results.json")
    p.add_argument("--out", type=Path, help="report directory (default: beside results.json)")
    _reveal(p)

    _slurm_parsers(verbs, prog)

    p = verbs.add_parser("release", help="write a student copy (no solutions, no hidden tests) and verify it")
    p.add_argument("--out", type=Path, required=True, help="directory for the copy (new or empty)")
    p.add_argument("--force", action="store_true", help="replace an earlier release in --out")
    p.add_argument("--no-verify", dest="verify", action="store_false",
                   help="skip the proof (configure, build every student binary, make grade)")
    p.add_argument("--keep-verify", dest="keep", action="store_true",
                   help="keep the scratch copy the proof built")
    p.add_argument("--reference-archs", default=",".join(DEFAULT_REFERENCE_ARCHS), metavar="ARCHS",
                   help="GPU architectures to ship each reference compiled for, so the copy scores perf points "
                        "(machine code only; default %(default)s; 'none': no perf points in the copy)")
    _build_opts(p)

    p = verbs.add_parser("batch", help="grade a class: one folder or archive per student in DIR; reports, class "
                                       "summary and gradebook in --out; resumable")
    p.add_argument("batch_dir", type=Path, metavar="DIR", help="one submission per student: folders or .zip/.tar.gz")
    _labs(p)
    p.add_argument("--out", type=Path, required=True, help="OUT/<student>/ reports, OUT/class-summary.html, OUT/gradebook.csv")
    p.add_argument("--force", action="store_true", help="grade every student again, even unchanged ones")
    p.add_argument("--compile-only", dest="compile_only", action="store_true",
                   help="build and check each submission, run no test (even with a GPU): rows say what compiled and "
                        "what the static checks refused; exit 0 when everything compiled, 3 otherwise")
    p.add_argument("-j", "--jobs", type=int,
                   help="parallel build slots (default: 4, or 2 per GPU with --gpus; at most the CPU count)")
    p.add_argument("--gpus", metavar="all|0,2,3",
                   help="grade on several GPUs of this node: one run worker per GPU (nvidia-smi's indices), "
                        "each student's runs all on one; default: the one GPU the CUDA runtime picks")
    p.add_argument("--preset", help="CMake preset (default: 'default' with a GPU, 'ci' without)")
    p.add_argument("--timeout", type=float, dest="timeout_s", help="seconds per test binary run (default: lab.toml)")
    p.add_argument("--max-seconds", type=float, dest="max_seconds", metavar="S",
                   help="time limit of each student's grade (default: 1 h plus each lab's timeout)")
    p.add_argument("--sanitizer", type=_tools, dest="sanitizer_tools", metavar="TOOLS",
                   help="compute-sanitizer tools to run, comma-separated, or 'none' (default: lab.toml)")
    p.add_argument("--no-sandbox", dest="sandbox", action="store_false",
                   help="do not run test binaries under bubblewrap even where it is installed")
    _confine_opts(p)
    p.add_argument("--roster", type=Path, metavar="CSV", help="the class: id, name, email[, aliases, submitted_at]; "
                                                            "missing and unmatched submissions are listed")
    p.add_argument("--course", type=Path, metavar="TOML", help="due dates and the late policy (course.toml)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.add_argument("--similarity", action=argparse.BooleanOptionalAction, default=True,
                   help="write OUT/similarity.html, the most similar pairs of files per lab (default: on; it "
                        "informs, it changes no grade)")
    p.add_argument("--similarity-threshold", type=similarity.threshold_arg, metavar="SHARE",
                   help="flag pairs at or above this similarity, 0..1 or a percentage (default 0.5)")

    p = verbs.add_parser("similarity", help="pairs of suspiciously similar student files per lab, the skeleton's "
                                            "code left out: OUT/similarity.html (needs copydetect)")
    p.add_argument("path", type=Path, metavar="SUBMISSIONS_OR_OUT",
                   help="a folder of submissions (as batch reads it) or a folder `grader batch` wrote")
    p.add_argument("--lab", dest="labs", action="append", default=[], metavar="NN",
                   help="a lab (repeatable; default: all)")
    p.add_argument("--out", type=Path,
                   help="where similarity.html goes (default: OUT itself; required for SUBMISSIONS)")
    p.add_argument("--threshold", type=similarity.threshold_arg, metavar="SHARE",
                   help="flag pairs at or above this similarity, 0..1 or a percentage (default 0.5)")
    return parser


def lab_tree(explicit: str | None) -> Path:
    try:
        return find_root(explicit)
    except LabError as err:
        raise GraderError(str(err), Exit.USAGE) from None


def dispatch(args: argparse.Namespace) -> Exit:
    if args.verb == "report":  # a results.json needs no lab tree
        return commands.cmd_report(args.source, args.out, reveal_hidden=args.reveal_hidden)
    root = lab_tree(args.root)
    if args.verb == "list":
        return commands.cmd_list(root)
    if args.verb == "doctor":
        return commands.cmd_doctor(root, brief=args.brief)
    if args.verb == "build":
        return commands.cmd_build(root, [] if args.all else args.labs, args.preset, args.jobs, args.solution)
    if args.verb in ("test", "grade"):
        common = dict(solution=args.solution, preset=args.preset, jobs=args.jobs, build=args.build,
                      timeout_s=args.timeout_s, progress=Progress(quiet=args.quiet), submission=args.submission,
                      max_seconds=args.max_seconds, sanitizer_tools=args.sanitizer_tools, sandbox=args.sandbox,
                      small=args.small, confine=args.confine, host_memory_mib=args.host_memory_mib,
                      compile_timeout_s=args.compile_timeout_s)
        if args.verb == "test":
            if args.profile:
                raise GraderError("--profile belongs to grade (the profile goes into its report)", Exit.USAGE)
            return commands.cmd_test(root, args.labs, **common)
        return commands.cmd_grade(root, args.labs, out_dir=args.out, reveal_hidden=args.reveal_hidden,
                                  profile=args.profile, reference_cache=args.reference_cache, **common)
    if args.verb == "skeleton":
        return commands.cmd_skeleton(root, args.labs, write=args.write)
    if args.verb == "check":
        return commands.cmd_check(root, args.labs, preset=args.preset, list_tests=args.list_tests)
    if args.verb == "mutants":
        return mutants.cmd_mutants(root, args.labs, check=args.check, out=args.out, jobs=args.jobs,
                                    preset=args.preset, timeout_s=args.timeout_s, quiet=args.quiet,
                                    gpu_runs=args.gpu_runs, gpus=args.gpus, diagnose=args.diagnose)
    if args.verb == "batch":
        from grader.course.batch.runner import cmd_batch

        return cmd_batch(root, args.batch_dir, args.out, args.labs, force=args.force, jobs=args.jobs, preset=args.preset,
                         timeout_s=args.timeout_s, max_seconds=args.max_seconds, sanitizer_tools=args.sanitizer_tools,
                         sandbox=args.sandbox, quiet=args.quiet, confine=args.confine,
                         host_memory_mib=args.host_memory_mib, compile_only=args.compile_only, gpus=args.gpus,
                         roster=args.roster, course=args.course, similarity=args.similarity,
                         similarity_threshold=args.similarity_threshold)
    if args.verb == "similarity":
        return similarity.cmd_similarity(root, args.path, args.labs, out=args.out, threshold=args.threshold)
    if args.verb == "batch-merge":
        return batch_merge.cmd_batch_merge(args.outs, args.dest, roster=args.roster, title=args.title,
                                           expect=args.expect, unmatched=args.unmatched)
    if args.verb == "slurm":
        return slurm_commands.dispatch_slurm(root, args)
    if args.verb == "release":
        return commands.cmd_release(root, args.out, force=args.force, verify=args.verify, preset=args.preset,
                                    jobs=args.jobs, keep=args.keep, reference_archs=args.reference_archs)
    raise GraderError(f"unknown verb {args.verb}")  # pragma: no cover - argparse rejects it first


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(_verb_alias(sys.argv[1:] if argv is None else list(argv)))
    try:
        return int(dispatch(args))
    except GraderError as err:
        print(f"grader: {err}", file=sys.stderr)
        return int(err.code)
    except KeyboardInterrupt:
        print("grader: interrupted", file=sys.stderr)
        return 130
