"""A template whose import fails: line 3 raises."""

raise ImportError("this template needs a package that is not installed")
