"""The SR-IOV node agent of whitesky.capvco (runs in the workload cluster, one per node)."""
