# Feed the GPUs. The two commands a learner needs: `make lab` and `make test`.
# Both create .venv from requirements.txt when it is missing or older than the pins.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
KERNEL := feed-the-gpus
# JupyterLab refuses to run as root unless told; containers and CI often are root.
LAB_ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: lab test check site exercises readme schedule strip gpu-check bench stress mutants clean

$(STAMP): requirements.txt pyproject.toml tools/jupyterlab-overrides.json helpers/start_method.py
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is needed (found " + sys.version.split()[0] + "); set PYTHON=python3.11 or newer")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@# ipykernel install leaves its empty /tmp/tmp*_kernels folder behind: give it one of ours, removed after
	tmp=$$(mktemp -d) && TMPDIR=$$tmp $(PY) -m ipykernel install --sys-prefix --name $(KERNEL) \
	    --display-name "Feed the GPUs (.venv)" >/dev/null; status=$$?; rm -rf "$$tmp"; exit $$status
	@# COURSE_START_METHOD=forkserver|spawn: every Python of the .venv starts with that start method (helpers/start_method.py)
	$(PY) -c 'import sysconfig; from helpers.start_method import PTH_LINE, PTH_NAME; open(sysconfig.get_paths()["purelib"] + "/" + PTH_NAME, "w").write(PTH_LINE)'
	@# widget messages on the main shell: on a subshell thread, a control's plot races the cell's own
	@# pyplot figure and comes out blank or half drawn (jupyterlab/jupyterlab#19719)
	@mkdir -p $(VENV)/share/jupyter/lab/settings
	cp tools/jupyterlab-overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	@touch $(STAMP)
	@echo "ready: $(VENV) with the pinned packages, helpers (editable) and the '$(KERNEL)' kernel"

## lab: set up .venv if needed and open JupyterLab on notebooks/
lab: $(STAMP)
	@$(PY) -c 'import sys; from helpers.start_method import main; sys.exit(main())'
	$(VENV)/bin/jupyter lab --ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/notebooks $(LAB_ROOT_FLAG)

# pytest-xdist processes: `make check` runs one per usable core (JOBS); `make test` runs TEST_JOBS (1 unless told: with
# TEST_JOBS=2 its first pytest run took 1028-1162 s on the 2-core VM, against 1528-1763 s in one process; each of its
# first two runs found a test that failed only beside another (both fixed); of the fresh-clone runs since, 764a922's
# passed (1199 s from the clone). It becomes the default once three pass, one beside a busy program). Each test file
# runs whole in one process, in tests/conftest.py RUN_ORDER (slowest tiers first).
JOBS ?= $(shell $(PY) -c 'from helpers.env import usable_cpus; print(usable_cpus())')
TEST_JOBS ?= 1
XDIST = -n $(TEST_JOBS) --dist loadscope --no-loadscope-reorder

## test: set up .venv if needed and run the complete test suite; prints the 25 slowest tests
# Two pytest runs: everything but the site test, in TEST_JOBS processes; then the site test, which renders the notebooks the
# first run executed (it reads build/suite-run.json, tagged with this make's COURSE_SUITE_RUN); it runs unless the first was
# interrupted or could not run (exit status 2 or more). Either failing fails.
test: $(STAMP)
	@$(PY) -c 'import sys; from helpers.start_method import main; sys.exit(main())'
	@run=$$(date +%s%N); status=0; \
	COURSE_SUITE_RUN=$$run $(PY) -m pytest $(XDIST) --ignore=tests/test_site.py --durations=25 || status=$$?; \
	[ $$status -gt 1 ] || COURSE_SUITE_RUN=$$run $(PY) -m pytest tests/test_site.py --durations=5 || status=$$?; \
	exit $$status

## check: what a change to helpers/ needs, in under 2 minutes on 2 cores: the "unit" tier (tests/conftest.py TIERS)
check: $(STAMP)
	$(PY) -m pytest tests -m unit -q --durations=10 -n $(JOBS) --dist load

## site: every lesson, exercise and solution, executed, as a static site in build/site/ that opens offline
# (It reuses the notebooks a `make test` run executed; executes only those missing or out of date)
site: $(STAMP)
	$(PY) tools/build_site.py

## exercises: regenerate exercises/ from solutions/
exercises: $(STAMP)
	$(PY) tools/make_exercises.py

## readme: regenerate the README's course map from helpers/course.py LESSONS
readme: $(STAMP)
	$(PY) tools/make_readme.py

## schedule: regenerate the instructor guide's workshop schedules from helpers/course.py LESSONS
schedule: $(STAMP)
	$(PY) tools/make_schedule.py

## strip: clear outputs and execution counts from every notebook
strip: $(STAMP)
	$(PY) tools/check_notebooks.py --strip

## gpu-check: on a CUDA machine, measure lesson 04's transfers and run the suite with every CUDA section required; report in gpu-check/
gpu-check: $(STAMP)
	$(PY) tools/gpu_check.py

## bench: measure lesson 03's loader effects side by side, then run the loader doctor on every corpus loader (doctor_corpus) with timings; exits non-zero when one misses its target
bench: $(STAMP)
	$(PY) tools/bench.py
	$(PY) tools/doctor_bench.py --runs 1 --cli

## mutants: plant small bugs (mutmut) in the listed helpers, one at a time, and count those the tests catch, per module; exit 1 under 90 % (`make mutants MODULES="samplers imbalance"`)
MODULES ?=
mutants: $(STAMP)
	$(PY) tools/mutants.py $(MODULES)

## stress: run each lesson with timing claims RUNS times (default 5), every other run beside BUSY CPU-bound programs (default 2); a table of what failed, what it measured and each lesson's slowest cell
RUNS ?= 5
BUSY ?= 2
LESSONS ?=
stress: $(STAMP)
	$(PY) tools/stress.py --runs $(RUNS) --busy $(BUSY) $(LESSONS)

clean:
	rm -rf $(VENV) build *.egg-info
