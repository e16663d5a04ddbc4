# Verbs over cmake, ctest and the grader. Compiler flags live in CMakePresets.json and CMake, not here.
#   make grade [LAB=06]   grade your labs (all, or one)      make demo   grade the reference solutions
#   make test             the project's own checks           make doctor what is installed, what is missing
PYTHON ?= python3
LAB ?=
OUT ?= reports
# A machine with a GPU builds for that GPU (preset "default"); one without builds for sm_90 ("ci").
PRESET ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo default || echo ci)
PY = $(shell cat build/.python 2>/dev/null || echo $(PYTHON))
GRADER = $(PY) -m grader

.PHONY: help python-env doctor build grade demo test test-python test-labs skeleton clean

help:
	@sed -n '2,4p' Makefile | sed 's/^# *//'

python-env:
	@PYTHON=$(PYTHON) ci/python-env

doctor: python-env
	$(GRADER) doctor

build: python-env
	$(GRADER) build --all --preset $(PRESET)

grade: python-env
	$(GRADER) grade $(LAB) --preset $(PRESET) --out $(OUT)

demo: python-env
	$(GRADER) grade $(LAB) --solution --preset $(PRESET) --out $(OUT)/demo

skeleton: python-env
	$(GRADER) skeleton --write

# The project's own checks: every lab builds (student and solution), the solutions pass their tests
# (skipped, with the reason, on a machine without a GPU), the grader's tests pass, skeletons are current.
test: python-env
	$(GRADER) doctor --brief
	$(GRADER) skeleton --check
	$(GRADER) build --all --preset $(PRESET)
	cmake --build build/$(PRESET) --target common_tests
	ctest --test-dir build/$(PRESET) -L common_tests --output-on-failure --no-tests=error
	@# A student release has no solutions/ and no grader tests: those two steps are the instructor's.
	@if [ -d solutions ]; then ctest --test-dir build/$(PRESET) -L solution -E 'Perf\.' -j 2 --output-on-failure --no-tests=error; fi
	@if [ -d grader/tests ]; then $(PY) -m pytest -q grader/tests; fi

clean:
	rm -rf build $(OUT)
