"""Runs a CI template's job on this machine the way GitHub Actions or GitLab CI would run it, as far as
the templates in ci/ need: step conditions (`if:`), `${{ }}` expressions in `env:`, `continue-on-error`,
step outputs, the job summary, `uses:` steps handed to stand-ins, and GitLab's script lines with
`set -eo pipefail`. Anything beyond that raises SimError, so a template that grows past what is
simulated fails its tests instead of passing them untested."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class SimError(Exception):
    """The template uses something this simulation does not model."""


# --- GitHub's expression language (the part the templates use) -------------------------------------------

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<op>==|!=|&&|\|\||!|\(|\))|(?P<num>\d+)|(?P<name>[A-Za-z_][\w.\-]*))"
)
_STATUS_FUNCS = ("always", "success", "failure", "cancelled")


@dataclass
class Context:
    """What expressions can read: github.*, vars.*, steps.<id>.outputs/outcome/conclusion, job status."""

    github: dict[str, str]
    vars: dict[str, str]
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    failed: bool = False  # a step before this one failed (after continue-on-error)

    def lookup(self, name: str) -> str:
        parts = name.split(".")
        if parts[0] == "github" and len(parts) == 2:
            return self.github.get(parts[1], "")
        if parts[0] == "vars" and len(parts) == 2:
            return self.vars.get(parts[1], "")
        if parts[0] == "steps" and len(parts) in (3, 4):
            step = self.steps.get(parts[1], {})
            if len(parts) == 4 and parts[2] == "outputs":
                return str(step.get("outputs", {}).get(parts[3], ""))
            if len(parts) == 3 and parts[2] in ("outcome", "conclusion"):
                return str(step.get(parts[2], ""))
        raise SimError(f"expression context {name!r} is not simulated")


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise SimError(f"cannot read expression {text!r} at {text[pos:]!r}")
        kind = next(k for k in ("str", "op", "num", "name") if m.group(k) is not None)
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    """or := and ('||' and)* ; and := cmp ('&&' cmp)* ; cmp := unary (('=='|'!=') unary)? ;
    unary := '!' unary | atom ; atom := string | number | name '(' ')' | name | '(' or ')'."""

    def __init__(self, text: str, ctx: Context) -> None:
        self.toks, self.i, self.ctx, self.text = _tokens(text), 0, ctx, text

    def parse(self) -> Any:
        value = self._or()
        if self.i != len(self.toks):
            raise SimError(f"unexpected {self.toks[self.i][1]!r} in {self.text!r}")
        return value

    def _peek(self) -> str | None:
        return self.toks[self.i][1] if self.i < len(self.toks) else None

    def _take(self) -> tuple[str, str]:
        if self.i >= len(self.toks):
            raise SimError(f"expression {self.text!r} ends early")
        self.i += 1
        return self.toks[self.i - 1]

    def _or(self) -> Any:
        left = self._and()
        while self._peek() == "||":
            self._take()
            right = self._and()
            left = left if _truthy(left) else right
        return left

    def _and(self) -> Any:
        left = self._cmp()
        while self._peek() == "&&":
            self._take()
            right = self._cmp()
            left = right if _truthy(left) else left
        return left

    def _cmp(self) -> Any:
        left = self._unary()
        if self._peek() in ("==", "!="):
            op = self._take()[1]
            right = self._unary()
            equal = str(left).lower() == str(right).lower()  # GitHub compares strings ignoring case
            return equal if op == "==" else not equal
        return left

    def _unary(self) -> Any:
        if self._peek() == "!":
            self._take()
            return not _truthy(self._unary())
        return self._atom()

    def _atom(self) -> Any:
        kind, value = self._take()
        if kind == "str":
            return value[1:-1].replace("''", "'")
        if kind == "num":
            return int(value)
        if value == "(":
            inner = self._or()
            if self._take()[1] != ")":
                raise SimError(f"unbalanced parentheses in {self.text!r}")
            return inner
        if kind == "name" and self._peek() == "(":
            self._take()
            if self._take()[1] != ")":
                raise SimError(f"only functions without arguments are simulated: {self.text!r}")
            if value == "always":
                return True
            if value == "success":
                return not self.ctx.failed
            if value == "failure":
                return self.ctx.failed
            if value == "cancelled":
                return False
            raise SimError(f"function {value}() is not simulated")
        if kind == "name":
            if value in ("true", "false"):
                return value == "true"
            return self.ctx.lookup(value)
        raise SimError(f"unexpected {value!r} in {self.text!r}")


def _truthy(value: Any) -> bool:
    return bool(value) and value != 0


def evaluate(expr: str, ctx: Context) -> Any:
    """The value of one expression (the text inside ${{ }}, or an if: condition)."""
    expr = expr.strip()
    if expr.startswith("${{") and expr.endswith("}}"):
        expr = expr[3:-2]
    return _Parser(expr, ctx).parse()


def condition(expr: str | None, ctx: Context) -> bool:
    """Whether a step or job with this if: runs. Without a status function GitHub adds success() &&."""
    if expr is None:
        return not ctx.failed
    text = str(expr).strip()
    if text.startswith("${{") and text.endswith("}}"):
        text = text[3:-2]
    if not any(re.search(rf"\b{f}\s*\(", text) for f in _STATUS_FUNCS):
        text = f"success() && ({text})"
    return _truthy(evaluate(text, ctx))


def interpolate(text: str, ctx: Context) -> str:
    """A string with every ${{ expr }} replaced by its value."""

    def one(m: re.Match[str]) -> str:
        value = evaluate(m.group(1), ctx)
        return ("true" if value else "false") if isinstance(value, bool) else str(value)

    return re.sub(r"\$\{\{(.*?)\}\}", one, str(text))


# --- a GitHub Actions job --------------------------------------------------------------------------------


@dataclass
class StepRun:
    name: str
    ran: bool
    outcome: str  # "success", "failure" or "skipped" (before continue-on-error)
    conclusion: str  # after continue-on-error
    exit_code: int | None = None
    output: str = ""  # stdout and stderr of a run: step
    env: dict[str, str] = field(default_factory=dict)  # its env: block, evaluated
    with_: dict[str, str] = field(default_factory=dict)  # a uses: step's with: block, evaluated


@dataclass
class JobRun:
    ran: bool
    result: str  # "success", "failure" or "skipped"
    steps: list[StepRun]
    summary: str  # what the steps wrote to $GITHUB_STEP_SUMMARY
    outputs: dict[str, dict[str, str]]  # step id -> its outputs

    def step(self, name: str) -> StepRun:
        return next(s for s in self.steps if s.name == name)


# A stand-in for an action: (the step's with:, its env:, the workspace) -> exit code.
Action = Callable[[dict[str, str], dict[str, str], Path], int]


def _read_outputs(path: Path) -> dict[str, str]:
    """$GITHUB_OUTPUT: name=value lines, and name<<DELIMITER ... DELIMITER blocks."""
    outputs: dict[str, str] = {}
    lines = path.read_text().splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            j = lines.index(delim, i + 1)
            outputs[name] = "\n".join(lines[i + 1:j])
            i = j + 1
            continue
        if "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
        i += 1
    return outputs


def _shell_command(shell: str | None, script: Path) -> list[str]:
    # GitHub: `bash -e {0}` when no shell is named, `bash --noprofile --norc -eo pipefail {0}` for bash
    if shell is None:
        return ["bash", "-e", str(script)]
    if shell == "bash":
        return ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)]
    raise SimError(f"shell {shell!r} is not simulated")


def run_github_job(
    workflow: Mapping[str, Any],
    job_id: str,
    workspace: Path,
    env: Mapping[str, str],
    actions: Mapping[str, Action],
    github: Mapping[str, str] | None = None,
    variables: Mapping[str, str] | None = None,
    timeout: float = 120.0,
) -> JobRun:
    """Run one job of a parsed workflow in workspace. env is the runner's environment; actions maps an
    action's name without its version ("actions/upload-artifact") to a stand-in."""
    job = workflow["jobs"][job_id]
    ctx = Context(github=dict(github or {}), vars=dict(variables or {}))
    if not condition(job.get("if"), ctx):
        return JobRun(False, "skipped", [], "", {})
    workspace.mkdir(parents=True, exist_ok=True)
    meta = workspace.parent / f".sim-{job_id}"
    meta.mkdir(exist_ok=True)
    summary_all = ""
    steps: list[StepRun] = []
    for n, step in enumerate(job["steps"]):
        name = step.get("name") or step.get("uses") or f"step {n}"
        if not condition(step.get("if"), ctx):
            steps.append(StepRun(name, False, "skipped", "skipped"))
            if "id" in step:
                ctx.steps[step["id"]] = {"outputs": {}, "outcome": "skipped", "conclusion": "skipped"}
            continue
        step_env = {k: interpolate(str(v), ctx) for k, v in (step.get("env") or {}).items()}
        output_file, summary_file = meta / f"output-{n}", meta / f"summary-{n}"
        output_file.write_text("")
        summary_file.write_text("")
        code: int
        text = ""
        with_: dict[str, str] = {}
        if "run" in step:
            script = str(step["run"])
            if "${{" in script:
                raise SimError(f"step {name!r}: expressions inside run: are not simulated (use env:)")
            path = meta / f"step-{n}.sh"
            path.write_text(script)
            full_env = {**env, **step_env, "GITHUB_OUTPUT": str(output_file),
                        "GITHUB_STEP_SUMMARY": str(summary_file), "GITHUB_WORKSPACE": str(workspace),
                        "CI": "true", "GITHUB_ACTIONS": "true"}
            proc = subprocess.run(_shell_command(step.get("shell"), path), cwd=workspace, env=full_env,
                                  text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                                  check=False)
            code, text = proc.returncode, proc.stdout
        elif "uses" in step:
            action = str(step["uses"]).split("@", 1)[0]
            if action not in actions:
                raise SimError(f"step {name!r}: no stand-in for the action {action!r}")
            with_ = {k: interpolate(str(v), ctx) for k, v in (step.get("with") or {}).items()}
            code = actions[action](with_, step_env, workspace)
        else:
            raise SimError(f"step {name!r} has neither run: nor uses:")
        outcome = "success" if code == 0 else "failure"
        conclusion = "success" if outcome == "success" or step.get("continue-on-error") is True else "failure"
        if conclusion == "failure":
            ctx.failed = True
        summary_all += summary_file.read_text()
        if "id" in step:
            ctx.steps[step["id"]] = {"outputs": _read_outputs(output_file), "outcome": outcome,
                                     "conclusion": conclusion}
        steps.append(StepRun(name, True, outcome, conclusion, code, text, step_env, with_))
    outputs = {sid: dict(s["outputs"]) for sid, s in ctx.steps.items()}
    return JobRun(True, "failure" if ctx.failed else "success", steps, summary_all, outputs)


# --- a GitLab CI job -------------------------------------------------------------------------------------


@dataclass
class GitLabRun:
    result: str  # "success" or "failure"
    exit_code: int
    output: str
    artifacts: list[Path]  # the artifact paths that exist after the job (kept when: always, or on success)
    junit: Path | None  # the JUnit report, when it exists and is kept


def run_gitlab_job(
    pipeline: Mapping[str, Any],
    job_id: str,
    workspace: Path,
    env: Mapping[str, str],
    variables: Mapping[str, str] | None = None,
    timeout: float = 120.0,
) -> GitLabRun:
    """Run one job's before_script and script in workspace as GitLab's bash shell does (one shell,
    `set -eo pipefail`, a failing line ends the job), then collect its artifacts."""
    job = pipeline[job_id]
    simulated = {"stage", "tags", "timeout", "variables", "script", "before_script", "artifacts", "image"}
    unknown = set(job) - simulated
    if unknown:
        raise SimError(f"job keys not simulated: {', '.join(sorted(unknown))}")
    job_vars = {k: str(v) for k, v in (pipeline.get("variables") or {}).items()}
    job_vars.update({k: str(v) for k, v in (job.get("variables") or {}).items()})
    job_vars.update(variables or {})
    lines = list(job.get("before_script") or []) + list(job["script"])
    script = "set -eo pipefail\n" + "\n".join(str(line) for line in lines) + "\n"
    workspace.mkdir(parents=True, exist_ok=True)
    path = workspace.parent / f".sim-{job_id}.sh"
    path.write_text(script)
    full_env = {**env, **job_vars, "CI": "true", "GITLAB_CI": "true"}
    proc = subprocess.run(["bash", str(path)], cwd=workspace, env=full_env, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=timeout, check=False)
    ok = proc.returncode == 0
    artifacts = job.get("artifacts") or {}
    when = artifacts.get("when", "on_success")
    kept = when == "always" or (when == "on_success" and ok) or (when == "on_failure" and not ok)
    paths = [workspace / p for p in artifacts.get("paths", [])] if kept else []
    junit_rel = (artifacts.get("reports") or {}).get("junit")
    junit = workspace / junit_rel if kept and junit_rel and (workspace / junit_rel).is_file() else None
    kept_paths = [p for p in paths if p.exists()]
    return GitLabRun("success" if ok else "failure", proc.returncode, proc.stdout, kept_paths, junit)


def os_environ_without_ci() -> dict[str, str]:
    """This process's environment without variables a real CI run would set (so the host's CI=true or
    GITHUB_* never leaks into a simulated job)."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("GITHUB_", "GITLAB_", "CI_", "RUNNER_")) and k not in ("CI", "NO_COLOR")}
