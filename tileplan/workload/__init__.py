"""Workloads: layers (one loop nest each) and networks (DAGs of layers)."""

from tileplan.workload.layer import Layer, OpKind, Precision
from tileplan.workload.network import Network

__all__ = ["Layer", "Network", "OpKind", "Precision"]
