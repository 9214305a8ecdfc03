"""Object storage, snapshots, ledger shipping and JSON Lines archives."""
