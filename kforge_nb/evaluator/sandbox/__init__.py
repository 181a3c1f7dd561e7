"""The candidate's sandbox: planned by the parent (layout.py), watched from outside (usage.py),
entered by the worker (child.py, root.py, privileges.py, libc.py); and reading safely what a
candidate could have made (safe_open.py)."""
