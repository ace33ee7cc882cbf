"""What every part of the protocol shares: its version and its error."""

# Bumped on a change an older peer would misread (a field renamed or retyped, a request's
# meaning changed); new requests, events and optional fields do not bump it: `hello` lists them.
PROTOCOL_VERSION = 1

# Who may ask a request (each request class says which, as `who`): READERS is everyone the
# socket lets in (the owner, operators and members of `socket.group`); OPERATORS is the owner
# (root and the user the daemon runs as) and members of `socket.operators_group`.
READERS = "readers"
OPERATORS = "operators"


class ProtocolError(ValueError):
    """A message outside the vocabulary: an unknown op, event kind, parameter or field, or a
    value of the wrong kind."""
