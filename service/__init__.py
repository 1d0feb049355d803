"""Everything of cardrules that talks to the outside world (CLI, later gRPC and HTTP)."""
