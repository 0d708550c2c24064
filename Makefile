# One venv, one install, one test command. Every target installs what it needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install test lint demo fashion-mnist bench-strategies bench-overhead clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[torch,dev]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP) fashion-mnist
	$(BIN)/ruff check baobab tests examples bench
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check baobab tests examples bench

# The main job: start the platform, upload, train for a few minutes, serve the best two, predict the test set.
demo: $(STAMP) fashion-mnist
	$(BIN)/python examples/demo.py

# Fashion-MNIST comes from Debian (nothing downloads at run time).
fashion-mnist:
	@dpkg -s dataset-fashion-mnist >/dev/null 2>&1 || \
		(export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist)

bench-strategies: $(STAMP)
	$(BIN)/python bench/strategies.py

bench-overhead: $(STAMP)
	$(BIN)/python bench/overhead.py

clean:
	rm -rf $(VENV) build *.egg-info data
