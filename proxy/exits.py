"""The commands' exit codes besides 0, in one place (a module of its own, imported by the CLI
before anything heavy)."""

EXIT_BAD_FILE = 1  # a file that cannot be read, a check or a diff that failed
EXIT_USAGE = 2  # flags or settings that cannot be used, as argparse exits
