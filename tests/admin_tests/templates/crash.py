"""A template that crashes the interpreter (a segmentation fault) when imported."""

import ctypes

print("about to read address 0", flush=True)
ctypes.string_at(0)
