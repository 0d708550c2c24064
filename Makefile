# One venv, one install, one test command. Every target installs what it needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install test lint demo bench-strategies clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[torch,dev]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check baobab tests examples bench
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check baobab tests examples bench

# The main job at this stage: build two datasets and tune two templates with the dev runner.
demo: $(STAMP)
	$(BIN)/baobab datasets build fashion-mnist --out data/fashion-mnist --limit 2000
	$(BIN)/baobab dev test-model examples/models/torch_cnn.py --class TorchCnn --task IMAGE_CLASSIFICATION \
		--train data/fashion-mnist/train.zip --val data/fashion-mnist/val.zip --trials 6 --seed 1
	$(BIN)/baobab datasets build tabular breast_cancer --out data/breast_cancer
	$(BIN)/baobab dev test-model examples/models/sklearn_tabular.py --class SkTabularClassifier \
		--task TABULAR_CLASSIFICATION --train data/breast_cancer/train.csv --val data/breast_cancer/val.csv \
		--trials 10 --seed 1

bench-strategies: $(STAMP)
	$(BIN)/python bench/strategies.py

clean:
	rm -rf $(VENV) build *.egg-info data
