"""Search strategies behind one propose/observe interface (and, later, the job driver)."""
