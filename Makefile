# Verbs over cmake, ctest and the grader. Compiler flags live in CMakePresets.json and CMake, not here.
# `make help` lists the verbs: each is the target line's `## ` comment.
PYTHON ?= python3
LAB ?=
OUT ?= reports
# A machine with a GPU builds for that GPU (preset "default"); one without builds for sm_90 ("ci").
PRESET ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo default || echo ci)
PY = $(shell cat build/.python 2>/dev/null || echo $(PYTHON))
GRADER = $(PY) -m grader

.PHONY: help python-env doctor build grade profile demo check skeleton mutants test test-labs test-python slurm-check clean

help: ## this list
	@echo "make VERB [LAB=06] [PRESET=default|ci|debug] [OUT=reports]"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## (.*)$$/  \1\t\2/' | expand -t 16

python-env: ## create .venv with the grader's packages (every verb does this first)
	@PYTHON=$(PYTHON) ci/python-env

doctor: python-env ## what is installed, what is missing (toolkit, CMake, GoogleTest, GPU)
	$(GRADER) doctor

build: python-env ## build every lab (student and reference binaries)
	$(GRADER) build --all --preset $(PRESET)

grade: python-env ## build, test, score and report your labs (all, or LAB=06) into reports/ (OUT=DIR)
	$(GRADER) grade $(LAB) --preset $(PRESET) --out $(OUT)

profile: python-env ## grade, then profile the timed kernels with Nsight Compute (LAB=05): report in reports/
	$(GRADER) grade $(LAB) --preset $(PRESET) --out $(OUT) --profile

# A student release has no solutions/: say so rather than grade nothing.
demo: python-env ## grade the reference solutions (the all-green report) into reports/demo/
	@if [ ! -d solutions ]; then \
	  echo "make demo: the reference solutions are not included in this copy of the workbook (a student"; \
	  echo "release has no solutions/), so there is nothing to demonstrate. Grade your own work: make grade."; \
	else $(GRADER) grade $(LAB) --solution --preset $(PRESET) --out $(OUT)/demo; fi

check: python-env ## check each lab's rubric (lab.toml) against the tests of the built binaries
	$(GRADER) check $(LAB) --preset $(PRESET)

mutants: python-env ## the mutation gate on a GPU: how many realistic bugs each lab's tests catch (instructors)
	@if [ ! -d solutions ]; then echo "make mutants: the mutants live beside the reference solutions, which this copy of the workbook does not include"; \
	else $(GRADER) mutants $(LAB) --out $(OUT)/mutants; fi

skeleton: python-env ## rewrite the student skeletons from the solutions (instructors)
	$(GRADER) skeleton --write

# The project's own checks: every lab builds (student and solution), every rubric matches its tests, the
# solutions pass their tests (skipped, with the reason, on a machine without a GPU), the grader's tests
# pass, skeletons are current.
test: test-labs test-python ## the project's own checks, what CI runs (test-labs, then test-python)

test-labs: python-env ## build every lab, check the rubrics and skeletons, run the reference's tests
	$(GRADER) doctor --brief
	$(GRADER) skeleton --check
	$(GRADER) build --all --preset $(PRESET)
	$(GRADER) check --preset $(PRESET)
	cmake --build build/$(PRESET) --target common_tests
	ctest --test-dir build/$(PRESET) -L common_tests --output-on-failure --no-tests=error
	@# A student release has no solutions/ and no grader tests: those steps are the instructor's.
	@if [ -d solutions ]; then $(GRADER) mutants --check; fi
	@if [ -d solutions ]; then ctest --test-dir build/$(PRESET) -L solution -E 'Perf\.' -j 2 --output-on-failure --no-tests=error; fi

test-python: python-env ## the grader's own tests (pytest, with the Python of .venv)
	@if [ -d grader/tests ]; then $(PY) -m pytest -q grader/tests; else echo "no grader/tests in this copy"; fi
	@# The chapters' figures match the constants they are drawn from (docs/figures/make_figures.py).
	@if [ -f docs/figures/test_figures.py ]; then $(PY) -m pytest -q docs/figures; fi

# Not part of make test: it needs root, installs and starts a single-node Slurm, and takes minutes.
slurm-check: python-env ## grader slurm on a real single-node Slurm cluster (root; minutes; instructors)
	@if [ ! -x ci/slurm-check ]; then echo "make slurm-check: course-staff tooling, not included in this copy of the workbook"; \
	else PYTHON=$(PY) ci/slurm-check; fi

clean: ## remove build/ and reports/
	rm -rf build $(OUT)
