"""The Python client and the ``baobab`` command line."""
