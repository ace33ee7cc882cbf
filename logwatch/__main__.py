"""`python -m logwatch` runs the command-line interface."""

from logwatch.cli.main import main

raise SystemExit(main())
