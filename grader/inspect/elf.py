"""What a compiled x86-64 object holds, read with binutils (readelf, objdump, c++filt): its sections,
symbols, relocations and instructions, and the calls between its functions.

    obj = read_object(Path("vector_add.cu.o"))
    obj.defined()                 # the symbols it defines
    obj.calls_to("cudaMallocHost")  # the instructions that call it, with the function they are in

Names are kept mangled (what the linker sees); demangle() turns them into C++ for messages. Nothing here
decides what is allowed: grader/inspect/objcheck.py does. localize() is the one change it makes to an
object: helpers the student left global become local before the object is linked.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

TOOL_TIMEOUT_S = 120.0


class ElfError(Exception):
    """The object could not be read (binutils missing, not an object, a tool failed)."""


@dataclass(frozen=True)
class Section:
    index: int
    name: str
    type: str  # PROGBITS, NOBITS, INIT_ARRAY, GROUP, ...
    flags: str  # readelf's letters: A alloc, W write, X execute, G group, ...
    size: int

    @property
    def executable(self) -> bool:
        return "X" in self.flags


@dataclass(frozen=True)
class Symbol:
    name: str  # mangled; for section symbols, the section's name
    bind: str  # LOCAL, GLOBAL, WEAK, UNIQUE
    type: str  # FUNC, OBJECT, NOTYPE, SECTION, FILE, IFUNC, TLS, COMMON
    visibility: str  # DEFAULT, HIDDEN, PROTECTED, INTERNAL
    section: str  # the section's name, or UND, ABS, COM
    value: int
    size: int

    @property
    def undefined(self) -> bool:
        return self.section == "UND"

    @property
    def defined(self) -> bool:
        return self.section not in ("UND", "") and self.type not in ("FILE", "SECTION")

    @property
    def external(self) -> bool:
        """Seen by the linker outside this object (global, weak or unique binding)."""
        return self.bind in ("GLOBAL", "WEAK", "UNIQUE")


@dataclass(frozen=True)
class Relocation:
    section: str  # the section it patches (".text", ".init_array", ...)
    offset: int
    type: str  # R_X86_64_PLT32, R_X86_64_64, ...
    target: str  # a symbol's name, or a section's name for section-relative ones
    addend: int


@dataclass(frozen=True)
class Instruction:
    section: str
    offset: int
    mnemonic: str  # "call", "jmp", "syscall", "int", ...
    operands: str
    direct_target: int | None = None  # the offset a direct call or jump goes to, in the same section


@dataclass(frozen=True)
class Call:
    """One call (or tail call) instruction and where it goes."""

    caller: Symbol | None  # the function it is in (None: outside any sized function symbol)
    target: str  # the called symbol's name (for calls inside the object: the function's name)
    instruction: Instruction


@dataclass
class ObjectFile:
    path: Path
    sections: list[Section] = field(default_factory=list)
    symbols: list[Symbol] = field(default_factory=list)
    relocations: list[Relocation] = field(default_factory=list)
    instructions: list[Instruction] = field(default_factory=list)

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def defined(self) -> list[Symbol]:
        return [s for s in self.symbols if s.defined]

    def undefined(self) -> list[Symbol]:
        return [s for s in self.symbols if s.undefined and s.name]

    @cached_property
    def _functions(self) -> dict[str, list[Symbol]]:
        by_section: dict[str, list[Symbol]] = {}
        for s in self.symbols:
            if s.type in ("FUNC", "IFUNC") and s.defined:
                by_section.setdefault(s.section, []).append(s)
        for funcs in by_section.values():
            funcs.sort(key=lambda s: (s.value, s.bind == "LOCAL"))  # the external alias first
        return by_section

    def functions(self) -> list[Symbol]:
        return [f for funcs in self._functions.values() for f in funcs]

    def function_at(self, section: str, offset: int) -> Symbol | None:
        """The function symbol whose [value, value + size) holds offset (a global one before a local alias)."""
        hits = [f for f in self._functions.get(section, []) if f.value <= offset < f.value + max(f.size, 1)]
        if not hits:
            return None
        external = [f for f in hits if f.external]
        return (external or hits)[0]

    def aliases(self, fn: Symbol) -> list[Symbol]:
        """Every function symbol at the same place (C1/C2 constructors, local and global names)."""
        return [f for f in self._functions.get(fn.section, []) if f.value == fn.value]

    @cached_property
    def _relocations_by_section(self) -> dict[str, list[Relocation]]:
        out: dict[str, list[Relocation]] = {}
        for r in self.relocations:
            out.setdefault(r.section, []).append(r)
        for rs in out.values():
            rs.sort(key=lambda r: r.offset)
        return out

    def relocations_in(self, section: str, start: int = 0, end: int | None = None) -> list[Relocation]:
        rs = self._relocations_by_section.get(section, [])
        return [r for r in rs if r.offset >= start and (end is None or r.offset < end)]

    @cached_property
    def _instructions_by_section(self) -> dict[str, list[Instruction]]:
        out: dict[str, list[Instruction]] = {}
        for ins in self.instructions:
            out.setdefault(ins.section, []).append(ins)
        return out

    def instruction_relocations(self) -> list[tuple[Instruction, Relocation]]:
        """Each relocation that patches an instruction, with that instruction."""
        pairs = []
        for section, instructions in self._instructions_by_section.items():
            relocs = self._relocations_by_section.get(section, [])
            j = 0
            for i, ins in enumerate(instructions):
                end = instructions[i + 1].offset if i + 1 < len(instructions) else None
                while j < len(relocs) and relocs[j].offset < ins.offset:
                    j += 1
                k = j
                while k < len(relocs) and (end is None or relocs[k].offset < end):
                    pairs.append((ins, relocs[k]))
                    k += 1
        return pairs

    def resolve(self, reloc: Relocation, pc_relative_adjust: int = 4) -> str:
        """The symbol a relocation points at: its own target, or for a section-relative one the
        function at that place in the section ('' when none)."""
        sec = self.section(reloc.target)
        if sec is None:
            return reloc.target
        offset = reloc.addend + (pc_relative_adjust if "PC32" in reloc.type or "PLT32" in reloc.type else 0)
        fn = self.function_at(reloc.target, offset)
        return fn.name if fn is not None else ""

    @cached_property
    def calls(self) -> list[Call]:
        """Every call and jump to a function: through a relocation (another object's function, or this
        object's through its symbol) or direct (a function of the same section)."""
        out: list[Call] = []
        patched: set[tuple[str, int]] = set()
        for ins, reloc in self.instruction_relocations():
            if not _is_branch(ins.mnemonic):
                continue
            patched.add((ins.section, ins.offset))
            target = self.resolve(reloc)
            if target:
                out.append(Call(self.function_at(ins.section, ins.offset), target, ins))
        for ins in self.instructions:
            if ins.direct_target is None or (ins.section, ins.offset) in patched or not _is_branch(ins.mnemonic):
                continue
            fn = self.function_at(ins.section, ins.direct_target)
            caller = self.function_at(ins.section, ins.offset)
            if fn is not None and (caller is None or fn.value != caller.value):  # jumps inside one function are not calls
                out.append(Call(caller, fn.name, ins))
        return out

    @cached_property
    def references(self) -> list[tuple[Symbol | None, str]]:
        """(function or None, the symbol it uses) for every relocation in code: calls, addresses taken,
        data loaded. The edges along which code is reachable."""
        out: list[tuple[Symbol | None, str]] = []
        for ins, reloc in self.instruction_relocations():
            target = self.resolve(reloc)
            if target:
                out.append((self.function_at(ins.section, ins.offset), target))
        for call in self.calls:
            out.append((call.caller, call.target))
        return out

    def calls_to(self, name: str) -> list[Call]:
        return [c for c in self.calls if c.target == name]

    def reachable(self, roots: Iterable[str]) -> set[str]:
        """Names of the functions (and other symbols) reachable from roots through references."""
        edges: dict[str, set[str]] = {}
        for fn, target in self.references:
            if fn is None:
                continue
            for alias in self.aliases(fn):
                edges.setdefault(alias.name, set()).add(target)
        seen: set[str] = set()
        stack = list(roots)
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            stack += [t for t in edges.get(name, ()) if t not in seen]
            for f in self.functions():  # an alias reached by one name is reached by all
                if f.name == name:
                    stack += [a.name for a in self.aliases(f) if a.name not in seen]
        return seen


_BRANCH = re.compile(r"^(call|jmp|bnd jmp|notrack jmp|j[a-z]{1,3})")


def _is_branch(mnemonic: str) -> bool:
    return bool(_BRANCH.match(mnemonic))


# --- reading ----------------------------------------------------------------------------------------


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ElfError(f"{name} is not installed (binutils)")
    return path


def _run(argv: list[str], what: str) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=TOOL_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ElfError(f"{what} failed: {err}") from None
    if proc.returncode != 0:
        raise ElfError(f"{what} failed: {proc.stderr.strip()[:300]}")
    return proc.stdout


_SECTION = re.compile(
    r"^\s*\[\s*(\d+)\]\s+(\S+)\s+(\S+)\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([A-Za-z]*)\s+\d+\s+\d+\s+\d+\s*$"
)
_SYMBOL = re.compile(
    r"^\s*\d+:\s+([0-9a-f]+)\s+(0x[0-9a-f]+|\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(?:\[[^\]]*\]\s+)?(\S+)(?:\s+(.*))?$"
)
_RELOC_HEADER = re.compile(r"^Relocation section '\.rela?(\S*)'")
_RELOC = re.compile(r"^([0-9a-f]+)\s+[0-9a-f]+\s+(R_\S+)\s+(?:[0-9a-f]+\s+)?(.*?)\s*(?:([+-])\s*([0-9a-f]+))?\s*$")
_DISASM_SECTION = re.compile(r"^Disassembly of section (\S+):")
_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(\S.*)$")
_DIRECT = re.compile(r"^([0-9a-f]+)\s+<")


def parse_sections(text: str) -> list[Section]:
    out = []
    for line in text.splitlines():
        m = _SECTION.match(line)
        if m and m.group(2) != "NULL":
            out.append(Section(int(m.group(1)), m.group(2), m.group(3), m.group(5), int(m.group(4), 16)))
    return out


def parse_symbols(text: str, sections: list[Section]) -> list[Symbol]:
    names = {s.index: s.name for s in sections}
    out = []
    for line in text.splitlines():
        m = _SYMBOL.match(line)
        if not m:
            continue
        value, size, typ, bind, vis, ndx, name = m.groups()
        size_n = int(size, 16) if size.startswith("0x") else int(size)
        section = ndx if not ndx.isdigit() else names.get(int(ndx), ndx)
        name = (name or "").strip()
        if typ == "SECTION" and not name:
            name = section
        out.append(Symbol(name, bind, typ, vis, section, int(value, 16), size_n))
    return out


def parse_relocations(text: str) -> list[Relocation]:
    out = []
    section = ""
    for line in text.splitlines():
        h = _RELOC_HEADER.match(line)
        if h:
            section = h.group(1)
            continue
        m = _RELOC.match(line.strip())
        if not m or not section:
            continue
        offset, rtype, target, sign, addend = m.groups()
        value = int(addend, 16) if addend else 0
        out.append(Relocation(section, int(offset, 16), rtype, target.strip(), -value if sign == "-" else value))
    return out


def parse_disassembly(text: str) -> list[Instruction]:
    out = []
    section = ""
    for line in text.splitlines():
        h = _DISASM_SECTION.match(line)
        if h:
            section = h.group(1)
            continue
        m = _INSN.match(line)
        if not m or not section:
            continue
        body = m.group(2).split("#", 1)[0].strip()  # objdump's comments (# 1234 <sym>)
        if not body or body.startswith("("):  # "(bad)"
            continue
        parts = body.split(None, 1)
        mnemonic, operands = parts[0], parts[1] if len(parts) > 1 else ""
        prefixes = ("rep", "repz", "repnz", "lock", "bnd", "notrack", "data16", "cs", "ds")
        while mnemonic in prefixes and operands:  # "notrack jmp *%rax", "bnd jmp ..."
            nxt = operands.split(None, 1)
            if mnemonic in ("bnd", "notrack"):
                mnemonic = f"{mnemonic} {nxt[0]}"
            else:
                mnemonic = nxt[0]
            operands = nxt[1] if len(nxt) > 1 else ""
            if mnemonic.startswith(("bnd ", "notrack ")):
                break
        target = None
        d = _DIRECT.match(operands)
        if d and _is_branch(mnemonic):
            target = int(d.group(1), 16)
        out.append(Instruction(section, int(m.group(1), 16), mnemonic, operands, target))
    return out


def read_symbols(path: Path) -> ObjectFile:
    """Sections and symbols only (no relocations, no instructions): enough for what an object defines
    and what it needs, and a tenth of read_object's time on a test object (its disassembly is most of
    that). Raises ElfError."""
    readelf = _tool("readelf")
    sections = parse_sections(_run([readelf, "-SW", str(path)], f"readelf -S {path.name}"))
    if not sections:
        raise ElfError(f"{path.name} is not an ELF object")
    symbols = parse_symbols(_run([readelf, "-sW", str(path)], f"readelf -s {path.name}"), sections)
    return ObjectFile(path, sections, symbols, [], [])


def read_object(path: Path) -> ObjectFile:
    """Sections, symbols, relocations and the instructions of every executable section. Raises ElfError."""
    readelf, objdump = _tool("readelf"), _tool("objdump")
    symbols_read = read_symbols(path)
    sections, symbols = symbols_read.sections, symbols_read.symbols
    relocations = parse_relocations(_run([readelf, "-rW", str(path)], f"readelf -r {path.name}"))
    argv = [objdump, "-d", "-w", "--no-show-raw-insn"]
    for s in sections:
        if s.executable:
            argv += ["-j", s.name]
    instructions = parse_disassembly(_run(argv + [str(path)], f"objdump -d {path.name}")) if len(argv) > 4 else []
    return ObjectFile(path, sections, symbols, relocations, instructions)


def localize(path: Path, names: Iterable[str]) -> None:
    """Make these global symbols of the object local, in place (objcopy --localize-symbol): nothing
    outside the object can see or stand in for them after that. The only change this module makes to
    an object; raises ElfError."""
    names = list(names)
    if not names:
        return
    argv = [_tool("objcopy")] + [f"--localize-symbol={n}" for n in names] + [str(path)]
    _run(argv, f"objcopy --localize-symbol {path.name}")


_RUNPATH = re.compile(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*)\]")


def library_paths(binary: Path) -> list[Path]:
    """The folders an executable's RUNPATH or RPATH names ($ORIGIN expanded): where the loader finds
    its own shared libraries (a lab's code library beside the build's bin/)."""
    return _runpath(binary, _dynamic(binary))


def _dynamic(binary: Path) -> str:
    return _run([_tool("readelf"), "-d", "-W", str(binary)], f"readelf -d {binary.name}")


def _runpath(binary: Path, dynamic: str) -> list[Path]:
    origin = str(Path(binary).resolve().parent)
    out: list[Path] = []
    for match in _RUNPATH.finditer(dynamic):
        for part in match.group(1).split(":"):
            if part:
                out.append(Path(part.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)))
    return out


_NEEDED = re.compile(r"\(NEEDED\)\s+Shared library: \[(.*)\]")


def own_libraries(binary: Path) -> list[Path]:
    """The shared libraries an executable needs that its own RUNPATH folders hold (a lab's code library:
    what the binary runs besides itself, which its own bytes do not show)."""
    dynamic = _dynamic(binary)
    names = _NEEDED.findall(dynamic)
    out: list[Path] = []
    for folder in _runpath(binary, dynamic):
        out += [folder / n for n in names if (folder / n).is_file() and folder / n not in out]
    return out


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Mangled name -> C++ name (c++filt); names it cannot demangle map to themselves."""
    names = list(dict.fromkeys(names))
    if not names:
        return {}
    tool = shutil.which("c++filt")
    if tool is None:
        return {n: n for n in names}
    try:
        proc = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, errors="replace",
                              timeout=TOOL_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return {n: n for n in names}
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or len(lines) != len(names):
        return {n: n for n in names}
    return dict(zip(names, lines))
