"""tileplan: plan and verify how CNNs execute on memory-constrained accelerators and multicore NPUs.

The package is layered (lower never imports higher): ``dims``, ``errors`` and ``files`` -> ``workload`` and
``arch`` -> ``mapping`` -> ``cost`` -> ``search`` -> ``plan`` -> ``api`` -> ``report`` -> ``cli``.
"""

__version__ = "0.1.0"
