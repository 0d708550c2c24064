"""A template that never finishes importing."""

print("starting to spin", flush=True)
while True:
    pass
