"""The CAPVCO controller: one process that watches the CAPVCO kinds and the Cluster API objects they hang from,
and reconciles them with the collection's core in-process (docs/controller.md)."""
