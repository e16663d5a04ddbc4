"""Required techniques ([[technique]] in lab.toml): did the graded file really use what the task teaches?

- kind "ptx": a regular expression over the PTX of the named kernel (`kernel`, a substring of its
  mangled name) and of the device functions it calls, transitively; comments are stripped first, so
  `asm("// shfl.sync")` proves nothing. The PTX is the one nvcc kept while it compiled the object
  (--keep, grader/inspect/static_checks.py), so it is exactly what runs.
- kind "symbol": a regular expression that must match, whole, the name of a function the file *calls*
  (a call instruction, in code reachable from a contract function; grader/inspect/elf.py), so an address kept
  in a table or a call in dead code proves nothing.

A missing technique withholds its points (or the whole task's) from its task, with a note and a
technique_missing entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from grader.inspect.elf import ObjectFile, demangle
from grader.model.labs import Lab, Technique

TECHNIQUE_SUITE = "Techniques"

# --- PTX -------------------------------------------------------------------------------------------

_FUNC_HEAD = re.compile(
    r"^[ \t]*(?:\.(?:visible|weak|extern)[ \t]+)*\.(entry|func)[ \t]+(?:\([^)]*\)[ \t]*)?([A-Za-z_$%][\w$]*)", re.MULTILINE
)
_CALL = re.compile(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([A-Za-z_$][\w$]*)")
_PTX_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_BRACE = re.compile(r"[{}]")


def strip_ptx_comments(ptx: str) -> str:
    """PTX without its comments (nvcc's own, and whatever inline asm put there); lines are kept."""
    return _PTX_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), ptx)


@dataclass(frozen=True)
class PtxFunction:
    name: str
    kind: str  # "entry" (a kernel) or "func"
    body: str


def ptx_functions(ptx: str) -> dict[str, PtxFunction]:
    """Kernels and device functions with a body, by mangled name."""
    found: dict[str, PtxFunction] = {}
    for m in _FUNC_HEAD.finditer(ptx):
        brace, semi = ptx.find("{", m.end()), ptx.find(";", m.end())
        if brace < 0 or (0 <= semi < brace):
            continue  # a declaration
        depth, end = 0, len(ptx) - 1
        for b in _BRACE.finditer(ptx, brace):  # brace by brace: a lab's PTX runs to megabytes
            depth += 1 if b.group() == "{" else -1
            if depth == 0:
                end = b.start()
                break
        found[m.group(2)] = PtxFunction(m.group(2), m.group(1), ptx[m.start():end + 1])
    return found


@lru_cache(maxsize=4)
def _comment_free_functions(ptx: str) -> dict[str, PtxFunction]:
    """ptx_functions of the PTX without comments, once per PTX: a lab checks several techniques on one file.
    (Callers only read the result.)"""
    return ptx_functions(strip_ptx_comments(ptx))


def kernel_ptx(ptx: str, key: str) -> tuple[str, list[str]]:
    """The comment-free PTX of every kernel whose name contains key, with the device functions they call
    (transitively); and the names of those kernels."""
    funcs = _comment_free_functions(ptx)
    kernels = [f for f in funcs.values() if f.kind == "entry" and key in f.name]
    seen: set[str] = set()
    parts: list[str] = []
    stack = [k.name for k in kernels]
    while stack:
        name = stack.pop()
        if name in seen or name not in funcs:
            continue
        seen.add(name)
        parts.append(funcs[name].body)
        stack += [c for c in _CALL.findall(funcs[name].body) if c not in seen]
    return "\n".join(parts), [k.name for k in kernels]


# --- calls -----------------------------------------------------------------------------------------


def called_names(obj: ObjectFile, contract: set[str]) -> set[str]:
    """The plain names (no parameters) of the functions called from code a contract function reaches."""
    roots = [f.name for f in obj.functions() if f.name in contract]
    reachable = obj.reachable(roots)
    targets = {c.target for c in obj.calls if c.caller is not None and c.caller.name in reachable}
    shown = demangle(targets)
    return {_plain_name(shown.get(t, t)) for t in targets}


def _plain_name(name: str) -> str:
    """'cudaMalloc' -> 'cudaMalloc'; 'cudaError cudaMalloc<float>(float**, unsigned long)' -> 'cudaMalloc'."""
    head = name.split("(", 1)[0]
    depth, out = 0, []
    for c in head:  # drop template arguments
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif depth == 0:
            out.append(c)
    return "".join(out).split()[-1] if "".join(out).split() else head


# --- techniques ------------------------------------------------------------------------------------


@dataclass
class TechniqueOutcome:
    technique: Technique
    found: bool
    where: str  # what was searched
    detail: str = ""  # why it could not be found, beyond "no match"

    @property
    def message(self) -> str:
        t = self.technique
        text = f"{t.message or t.pattern}. Expected /{t.pattern}/ in {self.where}"
        return text + (f" ({self.detail})" if self.detail else "")


def check_technique(t: Technique, calls: set[str] | None, ptx: str | None) -> TechniqueOutcome:
    pattern = re.compile(t.pattern)
    if t.kind == "symbol":
        where = "the functions your code calls"
        return TechniqueOutcome(t, any(pattern.fullmatch(n) for n in calls or ()), where)
    text, kernels = kernel_ptx(ptx or "", t.kernel or "")
    where = f"the PTX of {t.kernel}"
    if not kernels:
        return TechniqueOutcome(t, False, where, f"no kernel named like {t.kernel} was compiled")
    return TechniqueOutcome(t, bool(pattern.search(text)), where)


def check_all(lab: Lab, obj: ObjectFile | None, contract: set[str], ptx: str | None) -> tuple[list[TechniqueOutcome], list[str]]:
    """Every [[technique]] that can be checked with what there is; notes about the others."""
    notes: list[str] = []
    calls = called_names(obj, contract) if obj is not None else None
    outcomes = []
    for t in lab.techniques:
        if t.kind == "symbol" and calls is None:
            notes.append(f"technique not checked ({t.message or t.pattern}): the compiled file could not be read")
            continue
        if t.kind == "ptx" and ptx is None:
            notes.append(f"technique not checked ({t.message or t.pattern}): no PTX was kept for the compiled file")
            continue
        outcomes.append(check_technique(t, calls, ptx))
    return outcomes, notes
