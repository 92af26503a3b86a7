"""What reads or writes an installed torch: find it and its interpreter, read its files once under the
lock, carry out the core's plan (fsio is the one module that writes), run the runtime check, and
fingerprint real wheels into the releases table.
"""
