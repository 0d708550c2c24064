# One venv, one install, one test command. Every target installs what it needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# The web UI (web/, React + Vite) is built into the package (baobab/admin/web_dist), where
# the API serves it from at /; npm ci runs again only when the lock file changes.
WEB_DEPS := web/node_modules/.package-lock.json
WEB_DIST := baobab/admin/web_dist/index.html
WEB_SRC  := web/package.json web/index.html web/vite.config.ts web/tsconfig.json $(shell find web/src -type f 2>/dev/null)

.PHONY: images docker-engine install test test-fast wheel lint demo fashion-mnist chromium web web-test bench-strategies bench-spaces bench-overhead bench-overhead-celery bench-web bench-warm-start bench-enas bench-early-stopping bench-shared-data bench-fusion bench-automl-budget bench-automl-compare bench-user-job bench-placement bench-scale bench-serving bench-serving-fused clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[torch,dev]'
	touch $(STAMP)

install: $(STAMP) web

$(WEB_DEPS): web/package.json web/package-lock.json
	cd web && npm ci --no-audit --no-fund
	touch $(WEB_DEPS)

$(WEB_DIST): $(WEB_DEPS) $(WEB_SRC)
	cd web && npm run build

web: $(WEB_DIST)

# The installable package, dist/baobab-<version>-py3-none-any.whl, with the web UI built in
# (package-data admin/web_dist). No build isolation: the venv's pinned setuptools builds it,
# so nothing is fetched; build/ goes first so no module deleted since the last build slips in.
wheel: $(STAMP) web
	rm -rf build dist/baobab-*.whl
	$(BIN)/python -m build --wheel --no-isolation --outdir dist .

# Component tests of the UI (vitest, jsdom).
web-test: $(WEB_DEPS)
	cd web && npm test

test: $(STAMP) fashion-mnist web chromium docker-engine
	$(BIN)/ruff check baobab tests examples bench
	$(BIN)/lint-imports
	$(BIN)/mypy baobab
	cd web && npm test
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The fast loop: the tests that need no service of the machine (SQLite, no PostgreSQL, Redis,
# RabbitMQ, Docker, Chromium, emulated Kubernetes or wheel install) and start no platform, server or
# worker processes (slow: tests/conftest.py marks both), without the linters; under 5 minutes on
# 2 cores. `make test` is the full suite CI runs.
FAST_DESELECT := not (slow or postgres or redis or rabbitmq or docker or browser or kubernetes or package)
test-fast: $(STAMP) web
	$(BIN)/python -m pytest -m '$(FAST_DESELECT)' $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check baobab tests examples bench
	$(BIN)/lint-imports

# The documentation site (MkDocs, Material, mkdocstrings) into site/; --strict fails on any warning.
# Its reference pages are generated from the code by docs/_gen/reference.py.
.PHONY: docs
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): pyproject.toml | $(STAMP)
	$(BIN)/pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(STAMP) $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs build --strict --site-dir site

# The main job: start the platform, upload, train for a few minutes, serve the best two, predict the test set.
demo: $(STAMP) fashion-mnist
	$(BIN)/python examples/demo.py

# Fashion-MNIST comes from Debian (nothing downloads at run time).
fashion-mnist:
	@dpkg -s dataset-fashion-mnist >/dev/null 2>&1 || \
		(export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist)

# The browser tests drive Debian's Chromium through playwright (which may not download browsers here).
chromium:
	@test -x /usr/bin/chromium || \
		(export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y -qq chromium)

bench-strategies: $(STAMP)
	$(BIN)/python bench/strategies.py

# Strategies on model spaces: NAS-Bench-201's cell as base plus mutators (a table), MobileNetV2 blocks on Fashion-MNIST.
bench-spaces: $(STAMP) fashion-mnist
	$(BIN)/python bench/spaces.py

bench-overhead: $(STAMP)
	$(BIN)/python bench/overhead.py

# Cluster mode against a bare Celery worker; needs PostgreSQL and Redis on this machine.
bench-overhead-celery: $(STAMP)
	$(BIN)/python bench/overhead.py --executor celery

# Container images (docs/containers.md). The host's pip fills docker/wheels/ and
# the builds use it alone (PIP_NO_INDEX=1): no registry is reached from inside a build.
# BASE_IMAGE: any image with python3 3.11 and python3-venv; docker/base.sh makes one with no registry.
BASE_IMAGE ?= python:3.11-slim-bookworm
IMAGE_TAG  ?= 0.1.0
TORCH      ?= torch==2.13.0+cpu
WHEELS     := docker/wheels/.collected
$(WHEELS): pyproject.toml | $(STAMP)
	$(BIN)/pip wheel --quiet --wheel-dir docker/wheels '.[torch]' 'setuptools>=68' 'async-timeout>=4.0.3' '$(TORCH)'
	touch $(WHEELS)

images: $(STAMP) $(WHEELS)
	docker build -f docker/Dockerfile.api --build-arg BASE_IMAGE=$(BASE_IMAGE) --build-arg PIP_NO_INDEX=1 -t baobab-api:$(IMAGE_TAG) .
	docker build -f docker/Dockerfile.worker --build-arg BASE_IMAGE=$(BASE_IMAGE) --build-arg PIP_NO_INDEX=1 \
		--build-arg TORCH='$(TORCH)' -t baobab-worker:$(IMAGE_TAG) .

# The container tests' engine and images: dockerd started (as root) where none answers, a base image
# from debootstrap, then the images on it. Where dockerd cannot run, it says so and those tests skip.
TEST_BASE_IMAGE ?= baobab-base:bookworm
docker-engine: $(STAMP)
	@sh docker/engine.sh $(TEST_BASE_IMAGE)
	@if docker image inspect $(TEST_BASE_IMAGE) >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory images BASE_IMAGE=$(TEST_BASE_IMAGE); fi

bench-web: $(STAMP) web chromium
	$(BIN)/python bench/web_large_job.py

# Warm start from the model zoo against training from scratch (Fashion-MNIST), and parent selection among 1,000 models.
bench-warm-start: $(STAMP) fashion-mnist
	$(BIN)/python bench/warm_start.py

# ENAS against random search and ASHA, and at random search's cost: ENAS at its wall time (enas-equal) and random
# search with weight sharing (random-ws); 5 seeds, about 30 minutes on 2 idle cores.
bench-enas: $(STAMP) fashion-mnist
	$(BIN)/python bench/enas_fashion_mnist.py

bench-early-stopping: $(STAMP) fashion-mnist
	$(BIN)/python bench/early_stopping.py

# Eight concurrent trials of one job on one machine, the shared data cache on and off (Fashion-MNIST as a CSV).
bench-shared-data: $(STAMP) fashion-mnist
	$(BIN)/python bench/shared_data.py

# K same-shaped trials fused in one process (baobab.model.train_fused) against independent trial processes.
bench-fusion: $(STAMP) fashion-mnist
	$(BIN)/python bench/fusion.py

# A 15-minute AutoML job on the full Fashion-MNIST: Baobab with fusion, without, and Optuna, one after another.
bench-automl-budget: $(STAMP) fashion-mnist
	$(BIN)/python bench/automl_budget.py

# Time to accuracy, TorchCnn on Fashion-MNIST and digits, 5 minutes a way: Baobab's defaults, Optuna, Ray Tune with
# ASHA, 3 seeds each (about 2 hours).
bench-automl-compare: $(STAMP) fashion-mnist
	$(BIN)/pip install --quiet -e '.[torch,bench-automl]'
	$(BIN)/python bench/automl_compare.py

# A user's 6-minute job (the example CNN, 2 CPU slots): the defaults against search + fusion auto, 3 repeats each.
bench-user-job: $(STAMP) fashion-mnist
	$(BIN)/python bench/user_job.py

# The placement simulator's predicted makespans against the measured ones of 10 mixed jobs.
bench-placement: $(STAMP) fashion-mnist
	$(BIN)/python bench/placement.py

# The driver on 1,000 simulated slots (100,000 trials), proposals at 100,000 trials, the API on a 100,000-trial job;
# needs PostgreSQL on this machine.
bench-scale: $(STAMP)
	$(BIN)/python bench/scale.py

# The predictor against Ray Serve on the same models; wrk (Debian's package) makes the load.
bench-serving: $(STAMP) fashion-mnist
	$(BIN)/pip install --quiet -e '.[torch,bench-serving]'
	@command -v wrk >/dev/null || (export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y -qq wrk)
	$(BIN)/python bench/serving.py

# A k=5 ensemble of a small CNN served fused (one stacked worker), fanned out (--no-fuse) and one member alone.
bench-serving-fused: $(STAMP) fashion-mnist
	$(BIN)/python bench/serving_fused.py

clean:
	rm -rf $(VENV) build *.egg-info data web/node_modules baobab/admin/web_dist test-artifacts site
