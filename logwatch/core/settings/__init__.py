"""The daemon's configuration model, parsed strictly with every problem at once: targets,
sources, database, socket, policy (config), `[[notify]]` entries (notify_config), and the
placeholders a site's relaunch command may use (command_template). Leans on nothing else."""
