"""The lab: the emulator as a process and a one-machine SR-IOV network in namespaces.

A development package beside the emulator, never shipped with the collection:
the tests, the benchmarks, the chaos suite and ``make demo`` all use it.
"""
