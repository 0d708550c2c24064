"""``python -m baobab.predictor <inference_job_id>``: serve one inference job (see :mod:`baobab.predictor._main`)."""

from __future__ import annotations

import sys

from baobab.predictor._main import main

if __name__ == "__main__":
    sys.exit(main())
