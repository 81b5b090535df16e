"""The daemon layer: the command line, the configuration file, the long-lived process that runs jobs, its
control API, status, metrics, logs and state store. It uses the sync core and the Spark sink; nothing below
it imports it."""
