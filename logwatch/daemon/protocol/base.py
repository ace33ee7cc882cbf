"""What every part of the protocol shares: its version and its error."""

# Bumped on a change an older peer would misread (a field renamed or retyped, a request's
# meaning changed); new requests, events and optional fields do not bump it: `hello` lists them.
PROTOCOL_VERSION = 1


class ProtocolError(ValueError):
    """A message outside the vocabulary: an unknown op, event kind, parameter or field, or a
    value of the wrong kind."""
