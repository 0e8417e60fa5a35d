"""The `ccl-bench` command installed by the Python package."""

import signal
import sys


def main() -> None:
    from ccl_bench._native import main as run

    # Ctrl-C ends a long load as it ends the binary: Python's own handler
    # would wait for the Rust code to come back first.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.stdout.flush()
    sys.exit(run(["ccl-bench", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
