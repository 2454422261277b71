# make demo: bake a project with the default answers and train it the way a user would.
# make test: run the template tests (they bake projects and run them).
# make lock: rewrite the baked requirements.lock after changing a pin.
# make wheel: rebuild the baked vendor/ wheel of platekit after changing platekit/.
# make bench: what platekit's loop costs against bare Lightning and plain PyTorch -> build/bench/bench.json.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR := build/demo

.PHONY: demo test test-fast lock wheel bench clean

# Every package is hash-checked: pip from the bake's pip.lock, then the bake's lock with every
# answer's lines (tools/bake_pins.py) and the template's tools (requirements-dev.lock). The
# lock brings platekit's vendored wheel; the editable install over it makes the template
# tests run platekit/src as it stands.
BAKE := {{cookiecutter.project_slug}}
$(STAMP): requirements-dev.lock $(BAKE)/requirements.lock $(BAKE)/pip.lock tools/bake_pins.py platekit/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	grep -E '^pip==' $(BAKE)/pip.lock > $(VENV)/pip.lock
	$(BIN)/python -m pip install --quiet --require-hashes -r $(VENV)/pip.lock
	$(PYTHON) tools/bake_pins.py > $(VENV)/bake-pins.txt
	$(BIN)/python -m pip install --quiet --require-hashes -r $(VENV)/bake-pins.txt -r requirements-dev.lock
	$(BIN)/python -m pip install --quiet --no-deps -e platekit
	touch $@

demo: $(STAMP)
	rm -rf $(DEMO_DIR)
	$(BIN)/cookiecutter --no-input --output-dir $(DEMO_DIR) .
	$(MAKE) -C $(DEMO_DIR)/digits-classifier train

test: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n 2 --dist worksteal --durations=25

test-fast: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -m "not slow"

# A developer benchmark on platekit's fixture project (ARGS="--project DIR" for a bake;
# --help lists its options); a team's make bench is the bake's own.
bench: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python platekit/benchmarks/loop_overhead.py --out build/bench $(ARGS)

lock: $(STAMP)
	$(BIN)/python tools/relock.py
	$(MAKE) $(STAMP) && $(BIN)/python tools/import_names.py

# Standard library only: no venv needed.
wheel:
	$(PYTHON) tools/build_wheel.py

clean:
	rm -rf build .pytest_cache
