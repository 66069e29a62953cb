"""tileplan: plan and verify how CNNs execute on memory-constrained accelerators and multicore NPUs.

The package is layered (a module imports only from its own layer or lower ones; tests/test_layering.py
checks it): ``dims``, ``errors`` -> ``workload``, ``arch``, ``mapping``, ``files`` -> ``cost``, ``interop``
-> ``search``, ``parallel`` -> ``fusion``, ``program``, ``plan`` -> ``api``, ``compare`` -> ``report``,
``experiments``, ``sweep``, ``bench``, ``warmup`` (compiles every loop) -> ``cli`` -> ``entry``.
"""

__version__ = "0.1.0"
