"""A template that imports a package nobody installed."""

import baobab_no_such_package  # noqa: F401
