"""`python -m logwatch` runs the command-line interface."""

from logwatch.cli import main

raise SystemExit(main())
