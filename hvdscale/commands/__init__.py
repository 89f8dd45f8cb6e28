"""One module per ``hvdscale`` subcommand: its parser and its handler."""
