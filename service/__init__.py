"""Everything of cardrules that talks to the outside world (CLI, gRPC and HTTP)."""

try:
    import cardrules.cards.v1  # noqa: F401  # the generated code every part of the service uses
except ModuleNotFoundError as missing:  # `pip install .` alone: say what is missing, and how
    raise ModuleNotFoundError(
        "the generated API code (package cardrules-client, in clients/python) is not "
        "installed: install it beside this package, `pip install ./clients/python .`",
        name=missing.name,
    ) from missing
