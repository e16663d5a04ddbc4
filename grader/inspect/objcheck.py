"""The allowlists over a student's compiled object (labNN_student_object): what it may define, what it
may use, where its code and data may live, what runs before main, which instructions it may hold.

    findings = check_object(read_object(obj), lab, contract, assembly=(obj.with_suffix(".s")).read_text())

Every rule is an allowlist read off the compiler's output (grader/inspect/elf.py), never a pattern over the source:

- References: every undefined symbol matches grader/inspect/allowlist.toml (plus the lab's [allow]) and none of
  the lab's [forbid]. nvcc's own `exit` (the host stub of every __device__ function) and `atexit` (its
  kernel registration) are told apart by where they are called from, not by name.
- Definitions: a symbol visible outside the file is a contract function (one the tests call), a kernel or
  a __device__ function's host stub, or a template/inline function the compiler emitted; no C names, no
  global variables, nothing of GoogleTest, the C++ library or cudalab, no IFUNC. A C++ helper of the
  student's own left global is not refused: it is named in a "localize" finding, and the inspect stage
  makes it local (elf.localize) before the object is linked, so it cannot stand in for anything.
- Sections: only the ones the compiler makes (.text*, .data*, .rodata*, ...); no data in code sections;
  no .init/.fini/.ctors/.preinit_array.
- Initializers: .init_array holds nvcc's kernel registration and, at most, <iostream>'s std::ios_base::Init
  (GCC 12 makes one per file); nothing else of the file runs before main.
- Instructions: no syscall, sysenter or int 0x80 anywhere in the file's code.
- Host assembly: the compiler's own assembly listing (-save-temps) has no inline asm from the file itself
  (nvcc's .nv_fatbin block aside). Device asm in kernels is PTX and is not affected.

Each finding names the symbol and says, in one sentence, why a lab file may not do that.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from grader.inspect.elf import ObjectFile, Symbol, demangle
from grader.model.labs import Lab

ALLOWLIST = Path(__file__).with_name("allowlist.toml")

# What nvcc itself emits into every object: kernel registration and launch plumbing.
NVCC_DEFINED = ("__fatbinwrap_*", "__nv_*", "__cudaRegisterLinkedBinary_*", "hostRef*Array*Linkage")
NVCC_REGISTRATION = "*__sti____cudaRegisterAll*"
RESERVED_NAMESPACES = ("std::", "testing::", "cudalab::", "__gnu_cxx::", "__cxxabiv1::", "thrust::", "cub::",
                       "cuda::", "nv::", "cooperative_groups::")
IOSTREAM_INIT = {"_ZNSt8ios_base4InitC1Ev", "_ZNSt8ios_base4InitD1Ev", "__cxa_atexit", "__dso_handle",
                 "_ZStL8__ioinit"}
ALLOWED_SECTIONS = (
    ".text", ".text.*", ".data", ".data.*", ".bss", ".bss.*", ".rodata", ".rodata.*", ".tbss", ".tbss.*",
    ".tdata", ".tdata.*", ".init_array", ".eh_frame", ".gcc_except_table", ".gcc_except_table.*", ".nv_fatbin",
    ".nvFatBinSegment", ".nvHR*", "__nv_module_id", "__nv_relfatbin", ".nv_relfatbin", ".comment", ".note.GNU-stack",
    ".note.gnu.property", ".group", ".rela*", ".rel.*", ".symtab", ".strtab", ".shstrtab", ".debug_*",
)
SYSTEM_INSTRUCTIONS = ("syscall", "sysenter", "sysexit", "sysret")
NVCC_ASSEMBLY = (".section .nv_fatbin", ".section __nv_relfatbin")

WHY_SECTION = ("places code or data in a section the compiler does not use for ordinary code; code there can "
               "run before or after main or hide from these checks")
WHY_INIT = ("runs before main (a global object with a constructor, or a constructor attribute): only the "
            "contract's functions may run, when the tests call them. Make it a local variable, or a function-local "
            "static")
WHY_C_NAME = ("is visible outside your file with a C name (extern \"C\", or a global variable), so it could stand "
              "in for a library's own symbol: make it `static` (or put it in an anonymous namespace)")
WHY_EXTERNAL = ("has external linkage, but only the contract's functions may be visible outside your file: make it "
                "`static` (or put it in an anonymous namespace)")
WHY_LOCALIZED = ("is not `static`, so it was visible outside your file; the grader made it local before linking, "
                 "so it counts as your own helper. Mark helpers `static` (or put them in an anonymous namespace)")
WHY_RESERVED = ("defines part of the C++ library, GoogleTest or cudalab: a lab file may define only its own "
                "functions, kernels and the contract's")
WHY_IFUNC = "is an indirect function (ifunc), whose resolver runs before main: not allowed in a lab file"
WHY_DATA_IN_CODE = "is data placed among the code: not allowed in a lab file"
WHY_SYSCALL = ("makes a system call directly: a lab file reaches the machine only through the CUDA runtime and the "
               "C/C++ library functions it is allowed")
WHY_ASM = ("is host inline assembly: a lab file's host code is C++ (inline PTX in device code is fine)")


@dataclass(frozen=True)
class Finding:
    kind: str  # reference, definition, forbidden, section, initializer, instruction, assembly; localize
    name: str  # the symbol (as C++), section or place
    why: str
    symbol: str = ""  # the mangled name (localize)

    def line(self) -> str:
        return f"{self.name}: {self.why}"

    @property
    def refuses(self) -> bool:
        """Every finding refuses the file but "localize": a helper left global, made local before linking."""
        return self.kind != "localize"


@dataclass(frozen=True)
class Allowlist:
    references: tuple[str, ...]
    refuse: tuple[tuple[tuple[str, ...], str], ...]
    default_why: str

    def allows(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, g) for g in self.references)

    def why_not(self, name: str) -> str:
        for globs, why in self.refuse:
            if any(fnmatch.fnmatchcase(name, g) for g in globs):
                return why
        return self.default_why


@functools.lru_cache(maxsize=4)
def _base_allowlist(path: Path = ALLOWLIST) -> tuple[tuple[str, ...], tuple[tuple[tuple[str, ...], str], ...], str]:
    data = tomllib.loads(path.read_text())
    refs = tuple(g for group in data.get("references", {}).values() for g in group)
    refuse = tuple((tuple(r["symbols"]), r["why"]) for r in data.get("refuse", []))
    return refs, refuse, data.get("default", {}).get("why", "is not allowed in a lab file")


def allowlist_for(lab: Lab) -> Allowlist:
    refs, refuse, default = _base_allowlist()
    return Allowlist(refs + tuple(lab.allowed_symbols), refuse, default)


def _mangled(name: str) -> bool:
    return name.startswith("_Z")


def _global_namespace_function(name: str) -> bool:
    """_Z<digits>...: a C++ function of the global namespace (where every contract lives)."""
    return bool(re.match(r"^_Z\d", name))


class _Checker:
    def __init__(self, obj: ObjectFile, lab: Lab, contract: set[str], sources: list[Path]) -> None:
        self.obj = obj
        self.lab = lab
        self.contract = contract
        self.sources = {os.path.realpath(s) for s in sources}
        self.allow = allowlist_for(lab)
        names = [s.name for s in obj.symbols if s.name]
        self.cxx = demangle(names)
        self.findings: list[Finding] = []

    def add(self, kind: str, name: str, why: str) -> None:
        f = Finding(kind, name, why)
        if f not in self.findings:
            self.findings.append(f)

    def show(self, name: str) -> str:
        return self.cxx.get(name, name)

    # --- nvcc's own calls --------------------------------------------------------------------------

    def _device_stubs(self) -> set[str]:
        """Host stubs nvcc emits for __device__ functions: external functions whose only call is to
        exit, which nothing in the object calls or takes the address of and the tests do not call.
        Such a function can never run."""
        referenced = {t for _, t in self.obj.references}
        stubs = set()
        for fn in self.obj.functions():
            if not fn.external or fn.name in referenced or fn.name in self.contract:
                continue
            calls = [c for c in self.obj.calls if c.caller is not None and c.caller.value == fn.value
                     and c.caller.section == fn.section]
            if calls and all(c.target == "exit" for c in calls):
                stubs.add(fn.name)
        return stubs

    def _only_from(self, symbol: str, callers: set[str] | None = None, pattern: str | None = None) -> bool:
        """Whether every use of symbol is a call from one of callers (or from a function matching pattern)."""
        uses = [(fn, t) for fn, t in self.obj.references if t == symbol]
        if not uses:
            return False
        for fn, _ in uses:
            if fn is None:
                return False
            names = {a.name for a in self.obj.aliases(fn)}
            if callers is not None and names & callers:
                continue
            if pattern is not None and any(fnmatch.fnmatchcase(n, pattern) for n in names):
                continue
            return False
        return True

    # --- the rules ---------------------------------------------------------------------------------

    def sections(self) -> None:
        for sec in self.obj.sections:
            if not any(fnmatch.fnmatchcase(sec.name, g) for g in ALLOWED_SECTIONS):
                self.add("section", f"section {sec.name}", WHY_SECTION)
        for sym in self.obj.symbols:
            sec = self.obj.section(sym.section)
            if sym.type in ("OBJECT", "TLS") and sym.defined and sec is not None and sec.executable:
                self.add("section", self.show(sym.name), WHY_DATA_IN_CODE)

    def initializers(self) -> None:
        for reloc in self.obj.relocations_in(".init_array"):
            target = self.obj.resolve(reloc, pc_relative_adjust=0)
            if fnmatch.fnmatchcase(target, NVCC_REGISTRATION):
                continue
            if target.startswith("_GLOBAL__sub_I_") and self._iostream_only(target):
                continue
            self.add("initializer", self.show(target) if target else f"an entry of .init_array ({reloc.target})", WHY_INIT)

    def _iostream_only(self, fn_name: str) -> bool:
        """<iostream>'s static std::ios_base::Init and nothing else (GCC 12 emits one per file)."""
        fn = next((f for f in self.obj.functions() if f.name == fn_name), None)
        if fn is None:
            return False
        relocs = self.obj.relocations_in(fn.section, fn.value, fn.value + fn.size)
        for r in relocs:
            target = r.target
            sec = self.obj.section(target)
            if sec is not None:  # section-relative: the object or function at that place
                offset = r.addend + (4 if "PC32" in r.type or "PLT32" in r.type or "GOTPC" in r.type else 0)
                hit = next((s for s in self.obj.symbols if s.section == target and s.type in ("OBJECT", "FUNC")
                            and s.value <= offset < s.value + max(s.size, 1)), None)
                target = hit.name if hit is not None else ""
            if target not in IOSTREAM_INIT:
                return False
        return bool(relocs)

    def definitions(self) -> None:
        stubs = self._device_stubs()
        for sym in self.obj.defined():
            if not sym.external:
                continue
            name, shown = sym.name, self.show(sym.name)
            if self.forbidden(shown):
                continue
            if sym.type == "IFUNC":
                self.add("definition", shown, WHY_IFUNC)
                continue
            if any(fnmatch.fnmatchcase(name, g) for g in NVCC_DEFINED) or "__device_stub__" in name:
                continue
            if sym.visibility in ("HIDDEN", "INTERNAL"):
                continue  # never exported from the file's library: kernels (nvcc hides them), DW.ref.*
            if not _mangled(name):
                self.add("definition", shown, WHY_C_NAME)
                continue
            if shown.startswith("testing::") or "testing::" in shown.split("(")[0]:
                self.add("definition", shown, WHY_RESERVED)
                continue
            if sym.bind in ("WEAK", "UNIQUE"):
                continue  # templates and inline functions the compiler emitted
            if name in self.contract or name in stubs:
                continue
            if shown.startswith(RESERVED_NAMESPACES):
                self.add("definition", shown, WHY_RESERVED)
            elif sym.type in ("FUNC", "OBJECT"):  # the student's own C++ helper: made local, not refused
                f = Finding("localize", shown, WHY_LOCALIZED, name)
                if f not in self.findings:
                    self.findings.append(f)
            else:
                self.add("definition", shown, WHY_EXTERNAL)

    def _forbid_glob(self, shown: str) -> str | None:
        """The first of the lab's [forbid] globs that the (demangled) name matches."""
        return next((g for g in self.lab.forbidden_symbols if fnmatch.fnmatchcase(shown, g)), None)

    def forbidden(self, shown: str, once_per_glob: bool = False) -> bool:
        """Refuses the name when a [forbid] glob matches it (once_per_glob: unless that glob has refused
        a name already); says whether a glob matched."""
        glob = self._forbid_glob(shown)
        if glob is None:
            return False
        if not (once_per_glob and any(f.kind == "forbidden" and self._forbid_glob(f.name) == glob
                                      for f in self.findings)):
            self.add("forbidden", shown, f"this lab forbids {glob}: write the code yourself")
        return True

    def local_definitions(self) -> None:
        """A forbidden library's code compiled into the file with internal linkage (CUB's kernels and
        their launch stubs are local symbols): one line per glob, so that one use of a library is one
        line."""
        local = [s for s in self.obj.defined() if not s.external and s.type in ("FUNC", "OBJECT")]
        for sym in sorted(local, key=lambda s: s.type != "FUNC"):  # a function names the library best
            self.forbidden(self.show(sym.name), once_per_glob=True)

    def references(self) -> None:
        stubs: set[str] | None = None
        for sym in self.obj.undefined():
            name, shown = sym.name, self.show(sym.name)
            if self.forbidden(shown):
                continue
            if name == "exit":
                stubs = self._device_stubs() if stubs is None else stubs
                if self._only_from("exit", callers=stubs):
                    continue
            elif name == "atexit":
                if self._only_from("atexit", pattern=NVCC_REGISTRATION):
                    continue
            elif self.allow.allows(shown) or self.allow.allows(name):
                continue
            self.add("reference", shown, self.allow.why_not(shown) if shown != name else self.allow.why_not(name))

    def instructions(self) -> None:
        for ins in self.obj.instructions:
            hit = ins.mnemonic in SYSTEM_INSTRUCTIONS or (ins.mnemonic == "int" and "0x80" in ins.operands)
            if hit:
                fn = self.obj.function_at(ins.section, ins.offset)
                where = f" in {self.show(fn.name)}" if fn is not None else f" in {ins.section}"
                self.add("instruction", f"`{ins.mnemonic}` instruction{where}", WHY_SYSCALL)

    def assembly(self, listing: str) -> None:
        for place, first in asm_blocks(listing):
            if place is None:
                if not first.startswith(NVCC_ASSEMBLY):
                    self.add("assembly", f"inline assembly `{first[:40]}`", WHY_ASM)
                continue
            path, line = place
            if os.path.realpath(path) in self.sources or not os.path.isabs(path):
                self.add("assembly", f"{Path(path).name}:{line}", WHY_ASM)


_APP_PLACE = re.compile(r'^#\s*(\d+)\s+"([^"]*)"')


def asm_blocks(listing: str) -> list[tuple[tuple[str, int] | None, str]]:
    """Each inline-assembly block (#APP ... #NO_APP) of a GCC assembly listing: the source place GCC
    marks it with (file, line) or None, and its first instruction line."""
    out: list[tuple[tuple[str, int] | None, str]] = []
    lines = listing.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() != "#APP":
            i += 1
            continue
        place: tuple[str, int] | None = None
        first = ""
        i += 1
        while i < len(lines) and lines[i].strip() != "#NO_APP":
            text = lines[i].strip()
            m = _APP_PLACE.match(text)
            if m and place is None and m.group(2):
                place = (m.group(2), int(m.group(1)))
            elif text and not text.startswith("#") and not first:
                first = re.sub(r"\s+", " ", text)
            i += 1
        out.append((place, first))
        i += 1
    return out


def contract_of(test_objects: list[ObjectFile]) -> set[str]:
    """The contract: the global-namespace C++ functions the tests call (undefined in their objects)."""
    return {s.name for obj in test_objects for s in obj.undefined() if _global_namespace_function(s.name)}


def check_object(obj: ObjectFile, lab: Lab, contract: set[str], sources: list[Path],
                 assembly: str | None = None) -> list[Finding]:
    """Every reason to refuse this object (empty when it may run)."""
    c = _Checker(obj, lab, contract, sources)
    c.sections()
    c.initializers()
    c.definitions()
    c.local_definitions()
    c.references()
    c.instructions()
    if assembly is not None:
        c.assembly(assembly)
    return c.findings


def summarize(findings: list[Finding], limit: int = 6) -> str:
    """One line per finding, the first `limit` of them (one per symbol)."""
    shown = [f.line() for f in findings[:limit]]
    more = len(findings) - limit
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def symbol_names(symbols: list[Symbol]) -> list[str]:
    return [s.name for s in symbols]
