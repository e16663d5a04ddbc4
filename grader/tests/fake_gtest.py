"""A stand-in for a GoogleTest binary, driven by a JSON spec: fake_gtest.py SPEC [gtest flags].

Understands --gtest_list_tests, --gtest_output=json:PATH and --gtest_filter=PATTERNS, and writes JSON in
GoogleTest's shape at the end of the run (as gtest does: a crash or a hang leaves no file). Spec:

  {"root": {"gpu_name": "..."},          # top-level properties of the report
   "tests": [{"name": "Suite.Test/1", "do": "pass" | "fail" | "skip" | "segv" | "abort" | "hang" |
              "cuda_error" | "sticky" | "exit0" | "exit3" | "spam", ...}],
   "corrupt_output": false,              # write a truncated JSON file instead
   "list_fails": false,                  # --gtest_list_tests exits 1
   "echo": true,                         # echo the run's nonce, small mode and sanitizer in the report,
                                         # as the harness does (false: a report that does not)
   "log": "PATH"}                        # append each run's --gtest_filter to PATH, a line per process

Per test: "message" (fail), "reason" (skip), "error" (cuda_error / sticky: the cudaError name),
"properties" (recorded properties, e.g. perf_* for perf tests). "sticky": the test fails with a CUDA
error, and so does every later test in the same process (as a sticky CUDA error does).
"""

from __future__ import annotations

import fnmatch
import json
import os
import signal
import subprocess
import sys
import time


def matches(name: str, flt: str | None) -> bool:
    if not flt:
        return True
    pos, _, neg = flt.partition("-")
    pos_list = [p for p in pos.split(":") if p] or ["*"]
    neg_list = [n for n in neg.split(":") if n]
    return any(fnmatch.fnmatchcase(name, p) for p in pos_list) and not any(fnmatch.fnmatchcase(name, n) for n in neg_list)


def main() -> int:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    args = sys.argv[2:]
    tests = spec["tests"]
    if "--gtest_list_tests" in args:
        if spec.get("list_fails"):
            print("cannot list", file=sys.stderr)
            return 1
        suite = None
        for t in tests:
            s, name = t["name"].split(".", 1)
            if s != suite:
                print(f"{s}.")
                suite = s
            param = f"  # GetParam() = {name.split('/')[-1]}" if "/" in name else ""
            print(f"  {name}{param}")
        return 0
    if spec.get("touch"):  # a file that says the binary ran its tests (listing them is not running)
        open(spec["touch"], "a").close()
    out = next((a.split("=", 1)[1] for a in args if a.startswith("--gtest_output=")), None)
    flt = next((a.split("=", 1)[1] for a in args if a.startswith("--gtest_filter=")), None)
    if spec.get("log"):  # each run's filter, one line per process (listing is not a run)
        with open(spec["log"], "a") as log:
            log.write(f"{flt or '(all)'}\n")
    sticky = None
    suites: dict[str, list[dict]] = {}
    failed = False
    for t in tests:
        if not matches(t["name"], flt):
            continue
        suite, name = t["name"].split(".", 1)
        print(f"[ RUN      ] {t['name']}", flush=True)
        if t.get("prints"):  # what the test's code writes to stdout
            print(t["prints"], flush=True)
        entry = {"name": name, "status": "RUN", "result": "COMPLETED", "time": "0.01s", "classname": suite}
        entry.update(t.get("properties", {}))
        do = t.get("do", "pass")
        if failed and "--gtest_fail_fast" in args:  # GoogleTest skips the rest after a failure
            do = "skip"
            t = {**t, "reason": "fail fast"}
        if sticky:
            do, t = "cuda_error", {**t, "error": sticky}
        if do == "fail":
            entry["failures"] = [{"failure": t.get("message", "it failed"), "type": ""}]
        elif do == "skip":
            entry["result"] = "SKIPPED"
            entry["skip_reason"] = t.get("reason", "skipped")
        elif do in ("cuda_error", "sticky"):
            error = t.get("error", "cudaErrorIllegalAddress")
            entry["failures"] = [{
                "failure": f'unknown file\nC++ exception with description "CUDA error {error} (an illegal memory access '
                f'was encountered) from `cudaDeviceSynchronize()` at test.cu:42" thrown in the test body.',
                "type": "",
            }]
            if do == "sticky":
                sticky = error
        elif do == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif do == "abort":
            os.abort()
        elif do == "hang":
            subprocess.Popen(["sleep", "30"])  # a child in the same process group: the grader must kill it too
            time.sleep(30)
        elif do == "exit0":
            sys.exit(0)
        elif do == "exit3":
            sys.exit(3)
        elif do == "hog":  # holds t["mib"] MiB of touched host memory for a while
            hoard = [bytearray(1 << 20) for _ in range(int(t.get("mib", 300)))]
            time.sleep(3)
            del hoard
        elif do == "spam":
            for _ in range(20000):
                sys.stdout.write("x" * 99 + "\n")
        if "failures" in entry:  # as GoogleTest says it, while the run goes on
            print(f"[  FAILED  ] {t['name']} (10 ms)", flush=True)
        failed = failed or "failures" in entry
        suites.setdefault(suite, []).append(entry)
    if out and out.startswith("json:"):
        failures = sum(1 for v in suites.values() for e in v if e.get("failures"))
        echo = {}
        if spec.get("echo", True):  # what cudalab's harness records from the grader's variables
            echo = {"run_nonce": os.environ.get("CUDALAB_RUN_NONCE", ""),
                    "small_mode": "true" if os.environ.get("CUDALAB_SMALL", "") not in ("", "0") else "false",
                    "sanitizer_attached": "true" if os.environ.get("CUDA_INJECTION64_PATH") or any(k.startswith("NV_SANITIZER_INJECTION_") for k in os.environ) else "false"}
        report = {"tests": sum(len(v) for v in suites.values()), "failures": failures, "disabled": 0, "errors": 0,
                  "time": "0.1s", "name": "AllTests", **spec.get("root", {}), **echo,
                  "testsuites": [{"name": s, "tests": len(v), "testsuite": v} for s, v in suites.items()]}
        text = json.dumps(report, indent=2)
        with open(out[5:], "w") as f:
            f.write(text[: len(text) // 2] if spec.get("corrupt_output") else text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
