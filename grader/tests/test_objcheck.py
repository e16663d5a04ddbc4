"""The allowlists over a compiled lab file (grader/inspect/objcheck.py), read with binutils (grader/inspect/elf.py).

The cases compile lab 03's reference solution with one planted line each, the way CMake compiles a
student object, and check what is refused and why; the last tests check that every reference solution
and every skeleton in the build passes, and that every solution shows its lab's techniques. Each needs
nvcc (skipped without it, with the reason)."""

from __future__ import annotations

import dataclasses
import glob
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grader.host.toolkit import find_nvcc
from grader.inspect.elf import read_object, read_symbols
from grader.model.labs import discover
from grader.inspect.objcheck import allowlist_for, asm_blocks, check_object, contract_of
from grader.inspect.techniques import check_all

ROOT = Path(__file__).resolve().parents[2]
LABS = {lab.name: lab for lab in discover(ROOT)}
LAB03 = LABS["03-vector-add"]
NVCC = find_nvcc()
NEEDS_NVCC = pytest.mark.skipif(NVCC is None or shutil.which("objdump") is None,
                                reason="nvcc and binutils compile and read the cases")


def test_allowlist_globs() -> None:
    allow = allowlist_for(LAB03)
    for name in ("cudaMalloc", "cudaMemcpyAsync", "printf", "sqrtf", "memcpy", "operator new(unsigned long)",
                 "std::__throw_length_error(char const*)", "__cudaRegisterFatBinary", "std::cout"):
        assert allow.allows(name), name
    for name in ("fopen", "dlopen", "getenv", "exit", "system", "cudaLibraryLoadFromFile", "cudaGetDriverEntryPoint",
                 "std::basic_ofstream<char, std::char_traits<char> >::open(char const*, std::_Ios_Openmode)",
                 "testing::Test::RecordProperty(std::string const&, int)", "std::random_device::_M_getval()"):
        assert not allow.allows(name), name
    assert "files" in allow.why_not("fopen") and "environment" in allow.why_not("getenv")
    assert "ends the process" in allow.why_not("_exit") and "GoogleTest" in allow.why_not("testing::Foo::bar()")
    assert "loads code" in allow.why_not("cudaLibraryLoadFromFile") and "ask your instructor" in allow.why_not("sleep")


def test_asm_blocks_tell_the_files_asm_from_nvccs() -> None:
    listing = """\t.text
#APP
\t.section .nv_fatbin, "a"
#NO_APP
\tmovl\t$39, %eax
#APP
# 195 "/tmp/s/vector_add.cu" 1
\tsyscall
# 0 "" 2
#NO_APP
"""
    assert asm_blocks(listing) == [(None, '.section .nv_fatbin, "a"'), (("/tmp/s/vector_add.cu", 195), "syscall")]


# --- planted lines, compiled and checked ------------------------------------------------------------------

CASES = {
    # name: (planted code, what the refusal must say; "" = accepted)
    "constructor-attribute": ('#include <cstdio>\n__attribute__((constructor)) static void early() { printf("hi"); }\n',
                              "runs before main"),
    "global-object": ("#include <vector>\nstatic std::vector<int> v(10);\n", "runs before main"),
    "init-array-entry": ('#include <cstdio>\n__attribute__((section(".init_array"), used)) static void (*p)() = '
                         '[] { printf("x"); };\n', "runs before main"),
    "constructor-priority": ('#include <cstdio>\n__attribute__((constructor(101))) static void e() { printf("x"); }\n',
                             "section .init_array.00101"),
    "destructor": ('#include <cstdio>\n__attribute__((destructor)) static void late() { printf("x"); }\n',
                   "section .fini_array"),
    "define-fwrite": ('#include <cstdio>\nextern "C" size_t fwrite(const void*, size_t, size_t, FILE*) { return 0; }\n',
                      "fwrite: is visible outside your file with a C name"),
    "define-googletest": ("namespace testing { namespace internal { bool AlwaysTrue() { return true; } } }\n",
                          "testing::internal::AlwaysTrue(): defines part of"),
    "global-variable": ("int counter = 3;\n", "counter: is visible outside your file"),
    "non-static-helper": ("int round_up(int a, int b) { return (a + b - 1) / b * b; }\n",
                          "round_up(int, int): is not `static`, so it was visible outside your file; the grader made it local"),
    "syscall-asm": ('static long sc(long n) { long r; asm volatile("syscall" : "=a"(r) : "a"(n) : "rcx", "r11", '
                    '"memory"); return r; }\nfloat* allocate_pinned(std::size_t n);\n'
                    'static long pid() { return sc(39); }\nvoid free_pinned_x(float* p) { if (pid() == 1) free_pinned(p); }\n',
                    "`syscall` instruction"),
    "code-bytes-in-data": ('__attribute__((section(".text"))) static const unsigned char code[] = {0x0f, 0x05, 0xc3};\n'
                           'static void* get() { return (void*)code; }\nvoid* (*keep)() = get;\n',
                           "code: is data placed among the code"),
    "dlopen": ('#include <dlfcn.h>\nstatic void* h() { return dlsym(dlopen("libcublas.so", 2), "cublasSgemm_v2"); }\n'
               "void* (*keep)() = h;\n", "dlopen: looks for code"),
    "dl-iterate-phdr": ("#include <link.h>\nstatic int cb(struct dl_phdr_info*, size_t, void*) { return 0; }\n"
                        "static int walk() { return dl_iterate_phdr(cb, nullptr); }\nint (*keep)() = walk;\n",
                        "dl_iterate_phdr: looks for code"),
    "link-map": ("#include <link.h>\nstatic int walk() { return _r_debug.r_map ? 1 : 0; }\nint (*keep)() = walk;\n",
                 "_r_debug: looks for code"),
    "getenv": ('#include <cstdlib>\nstatic int small() { return getenv("CUDALAB_SMALL") != nullptr; }\n'
               "int (*keep)() = small;\n", "getenv: reads or changes the environment"),
    "exit-from-contract": ("#include <cstdlib>\n", "exit: ends the process"),
    "ofstream": ('#include <fstream>\nstatic void w() { std::ofstream f("/tmp/x"); f << 1; }\nvoid (*keep)() = w;\n',
                 "reads, writes or changes files"),
    "asm-label": ('extern "C" int my_open(const char*, int) __asm__("open");\nstatic int o() { return my_open("/x", 0); }\n'
                  "int (*keep)() = o;\n", "open: reads, writes or changes files"),
    "thread": ("#include <thread>\nstatic void t() { std::thread th([] {}); th.join(); }\nvoid (*keep)() = t;\n",
               "starts another program, process or thread"),
    "cublas-by-hand": ('extern "C" int cublasCreate_v2(void**);\nstatic int cb() { void* h; return cublasCreate_v2(&h); }\n'
                       "int (*keep)() = cb;\n", "this lab forbids cublas*"),
    "random-device": ('#include <random>\nstatic unsigned rd() { std::random_device d("/etc/hostname"); return d(); }\n'
                      "unsigned (*keep)() = rd;\n", "std::random_device"),
    "ifunc": ('static int impl() { return 1; }\nextern "C" void* resolve_it() { return (void*)impl; }\n'
              'extern "C" int chooser() __attribute__((ifunc("resolve_it")));\n', "indirect function (ifunc)"),
    "cub-reduce": ("#include <cub/device/device_reduce.cuh>\nstatic void s(const float* i, float* o, int n) { "
                   "size_t b = 0; cub::DeviceReduce::Sum(nullptr, b, i, o, n); }\n"
                   "static void (*keep)(const float*, float*, int) = s;\n", "this lab forbids *cub::*"),
    # accepted: what students write
    "helper-named-cubes": ("template <typename T> T sum_of_cubes(const T* v, int n) { T s = 0; "
                           "for (int i = 0; i < n; ++i) s += v[i] * v[i] * v[i]; return s; }\n"
                           "template float sum_of_cubes<float>(const float*, int);\n", ""),
    "printf-and-containers": ("#include <cstdio>\n#include <algorithm>\n#include <vector>\n#include <string>\n"
                              "static void dbg(std::vector<float> v) { std::sort(v.begin(), v.end()); "
                              'std::string s = "n=" + std::to_string(v.size()); printf("%s %f\\n", s.c_str(), v[0]); '
                              'fprintf(stderr, "e\\n"); fflush(stdout); }\n'
                              "static void (*keep)(std::vector<float>) = dbg;\n", ""),
    "iostream": ("#include <iostream>\nstatic void dbg(int x) { std::cout << x << std::endl; }\n"
                 "static void (*keep)(int) = dbg;\n", ""),
    "device-helpers": ("__device__ int counter;\n__constant__ float weights[4];\n"
                       "__device__ float twice(float x) { return 2 * x + weights[0] + counter; }\n", ""),
}


def _compile(name: str, body: str, out_dir: Path) -> tuple[Path | None, str]:
    src = out_dir / name / "vector_add.cu"
    src.parent.mkdir(parents=True)
    if name == "exit-from-contract":  # the contract function itself ends the process
        body = body + "void free_pinned(float*) { exit(0); }\n"
        base = (LAB03.solution_dir / "vector_add.cu").read_text().replace("void free_pinned(float* h_pinned) {",
                                                                         "static void free_pinned_x(float* h_pinned) {")
    else:
        base = (LAB03.solution_dir / "vector_add.cu").read_text()
    src.write_text(base + "\n" + body)
    obj = src.parent / "vector_add.cu.o"
    cmd = [NVCC, "-O3", "-std=c++17", "--generate-code=arch=compute_90,code=[compute_90,sm_90]", "-Xcompiler=-fPIC",
           f"-I{LAB03.path}", f"-I{ROOT / 'common' / 'include'}", "-DCCCL_DISABLE_NVTX", "-DNVTX_DISABLE",
           "--keep", f"--keep-dir={src.parent}", "-Xcompiler=-save-temps=obj", "-x", "cu", "-c", str(src), "-o", str(obj)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=src.parent, timeout=300, check=False)
    return (obj if proc.returncode == 0 else None), proc.stderr[-2000:]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict[str, tuple[Path | None, str]]:
    out = tmp_path_factory.mktemp("objcheck")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(_compile, name, body, out) for name, (body, _) in CASES.items()}
        return {name: f.result() for name, f in futures.items()}


def _contract() -> set[str]:
    """Lab 03's contract: the global-namespace functions its reference defines (what the tests call)."""
    return {"_Z15vector_add_hostRKSt6vectorIfSaIfEES3_", "_Z10vector_addPKfS0_Pfi",
            "_Z22vector_add_grid_stridePKfS0_Pfmii", "_Z11scale_x_aosP8Particlemf", "_Z11scale_x_soaPfmf",
            "_Z15allocate_pinnedm", "_Z11free_pinnedPf", "_Z15vector_add_fastPKfS0_Pfm"}


# Cases judged by another lab's [forbid] list (its other rules are lab 03's): lab 06 forbids CUB.
FORBID_OF = {"cub-reduce": "06-reduce", "helper-named-cubes": "06-reduce"}


@NEEDS_NVCC
@pytest.mark.parametrize("name", list(CASES))
def test_planted_line_is_judged(name: str, compiled) -> None:
    obj_path, log = compiled[name]
    assert obj_path is not None, f"{name} did not compile:\n{log}"
    listing = obj_path.with_suffix(".s")
    lab = LAB03
    if name in FORBID_OF:
        lab = dataclasses.replace(LAB03, forbidden_symbols=LABS[FORBID_OF[name]].forbidden_symbols)
    findings = check_object(read_object(obj_path), lab, _contract(), [obj_path.with_name("vector_add.cu")],
                            listing.read_text() if listing.is_file() else None)
    text = "\n".join(f.line() for f in findings)
    want = CASES[name][1]
    if want:
        assert want in text, f"{name}: expected {want!r} among:\n{text or '(nothing refused)'}"
    else:
        assert not findings, f"{name} should be accepted:\n{text}"


# --- every reference solution and skeleton in the build -----------------------------------------------------


def _build_dir() -> Path | None:
    for preset in ("ci", "default"):
        d = ROOT / "build" / preset
        if (d / "compile_commands.json").is_file() and glob.glob(str(d / "labs/*/CMakeFiles/*_object.dir/**/*.o"),
                                                                recursive=True):
            return d
    return None


BUILD = _build_dir()
NEEDS_BUILD = pytest.mark.skipif(BUILD is None, reason="no build of the labs (make test builds them first)")


def _lab_objects(lab, kind: str):
    d = BUILD / "labs" / lab.name / "CMakeFiles"
    tests = [read_object(Path(p)) for p in glob.glob(str(d / f"{lab.target_prefix}_*tests.dir/*.o"))]
    objs = glob.glob(str(d / f"{lab.target_prefix}_{kind}_object.dir/**/*.o"), recursive=True)
    return contract_of(tests), [Path(o) for o in objs]


@NEEDS_BUILD
def test_the_contract_from_symbols_alone_is_the_full_reads() -> None:
    """The inspect stage reads the tests' objects with read_symbols (no disassembly): every lab's contract
    is the one the full read gives, and not empty."""
    for lab in LABS.values():
        paths = glob.glob(str(BUILD / "labs" / lab.name / "CMakeFiles" / f"{lab.target_prefix}_*tests.dir/*.o"))
        full = contract_of([read_object(Path(p)) for p in paths])
        quick = [read_symbols(Path(p)) for p in paths]
        assert full and contract_of(quick) == full, lab.name
        assert all(not o.instructions and not o.relocations for o in quick)


@NEEDS_BUILD
@pytest.mark.parametrize("kind", ["solution", "student"])
def test_references_and_skeletons_pass_the_object_checks(kind: str) -> None:
    problems = []
    for lab in LABS.values():
        contract, objects = _lab_objects(lab, kind)
        src = (lab.solution_dir if kind == "solution" else lab.path) / lab.student_files[0]
        for obj in objects:
            listing = obj.with_suffix(".s")
            findings = check_object(read_object(obj), lab, contract, [src],
                                    listing.read_text() if listing.is_file() else None)
            problems += [f"{lab.name} {kind}: {f.line()}" for f in findings]
    assert not problems, "\n".join(problems)


@NEEDS_BUILD
def test_solutions_use_every_declared_technique() -> None:
    missing = []
    for lab in LABS.values():
        contract, objects = _lab_objects(lab, "solution")
        if not objects or not lab.techniques:
            continue
        keep = objects[0].parent
        while not keep.name.endswith(".dir"):
            keep = keep.parent
        ptx = "\n".join(Path(p).read_text() for p in glob.glob(str(keep / "*.ptx"))) or None
        outcomes, notes = check_all(lab, read_object(objects[0]), contract, ptx)
        missing += [f"{lab.name}: {n}" for n in notes]
        missing += [f"{lab.name}: {o.message}" for o in outcomes if not o.found]
    assert not missing, "\n".join(missing)


# --- a helper left global is made local, and then cannot stand in for anything -------------------------------

NEEDS_GXX = pytest.mark.skipif(shutil.which("g++") is None or shutil.which("objcopy") is None,
                               reason="g++ and objcopy build and rewrite the objects")


@NEEDS_GXX
def test_a_localized_helper_cannot_interpose(tmp_path: Path) -> None:
    """The student's object defines helper() without `static`, and so does the harness: as they are the
    link fails; once the student's helper is local each file calls its own."""
    import subprocess

    from grader.inspect.elf import localize

    (tmp_path / "student.cpp").write_text("int helper() { return 1; }\nint contract() { return helper(); }\n")
    (tmp_path / "harness.cpp").write_text("int helper() { return 2; }\nint contract();\n"
                                          "int main() { return contract() * 10 + helper(); }\n")
    for name in ("student", "harness"):
        subprocess.run(["g++", "-O0", "-c", f"{name}.cpp", "-o", f"{name}.o"], cwd=tmp_path, check=True)
    link = ["g++", "student.o", "harness.o", "-o", "prog"]
    assert subprocess.run(link, cwd=tmp_path, capture_output=True).returncode != 0  # multiple definition

    student = read_object(tmp_path / "student.o")
    lab = dataclasses.replace(LAB03, forbidden_symbols=())
    findings = check_object(student, lab, {"_Z8contractv"}, [tmp_path / "student.cpp"])
    assert [(f.kind, f.name, f.refuses) for f in findings] == [("localize", "helper()", False)]
    localize(tmp_path / "student.o", [f.symbol for f in findings])
    after = read_object(tmp_path / "student.o")
    assert not [f for f in check_object(after, lab, {"_Z8contractv"}, [tmp_path / "student.cpp"])]
    assert {s.name for s in after.defined() if s.external} == {"_Z8contractv"}
    subprocess.run(link, cwd=tmp_path, check=True)
    assert subprocess.run([str(tmp_path / "prog")]).returncode == 12  # the student's contract: its own helper
