"""Developer tools that live beside logwatch but are not shipped with it."""
