"""A template whose import fails in its own code, three lines down."""


def scale():
    return 1 / 0


FACTOR = scale()
