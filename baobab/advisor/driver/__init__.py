"""The job driver: takes up train jobs, turns proposals into trials, and owns the budgets
(see :mod:`baobab.advisor.driver._driver`)."""

from baobab.advisor.driver._driver import JobDriver

__all__ = ["JobDriver"]
