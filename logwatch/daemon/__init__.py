"""The service: streams and batcher, events, control socket, metrics, sd_notify, reload."""
