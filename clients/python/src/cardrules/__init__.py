"""cardrules API client: generated stubs (``cardrules.<game>.v1``) and ``cardrules.client``."""
