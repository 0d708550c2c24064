"""The error a space raises when it is defined wrong."""

from __future__ import annotations

__all__ = ["SpaceError"]


class SpaceError(ValueError):
    """A space that cannot be built: a mutator that matches nothing, a candidate that cannot
    replace its node, a base that torch.fx cannot trace. Raised when the space is defined (at
    upload for a template), so the message names the mutator and the node.

    An instance whose graph does not fit once run is not this error but
    :class:`baobab.exceptions.InvalidArchitectureError`: that is a normal outcome of a search.
    """
