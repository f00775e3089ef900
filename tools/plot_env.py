"""Matplotlib for Tether's plot tools (tools/plot_metrics.py,
tools/staleness_sweep.py): one import that works right after the quick start,
or one line saying what to install."""
import os
import subprocess
import sys


# Debian's interpreter, where python3-matplotlib installs matplotlib.
DEBIAN_PYTHON = "/usr/bin/python3"


def import_pyplot(tool, required=True):
    """Returns matplotlib.pyplot (Agg backend). When this interpreter has no
    matplotlib but Debian's /usr/bin/python3 has (a python3 from pyenv or a
    venv first on PATH), re-runs the tool under Debian's; otherwise exits
    with one line naming the Debian package (scripts/setup.sh installs it),
    or, with required=False, prints that line to stderr and returns None (a
    tool whose plots are an extra, tools/straggler_study.py)."""
    try:
        import matplotlib
    except ImportError:
        here = os.path.realpath(sys.executable or "")
        if (here != os.path.realpath(DEBIAN_PYTHON) and os.access(DEBIAN_PYTHON, os.X_OK)
                and not os.environ.get("TETHER_PLOT_REEXEC")
                and subprocess.call([DEBIAN_PYTHON, "-c", "import matplotlib"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL) == 0):
            print(f"{tool}: no matplotlib in {sys.executable}; running under {DEBIAN_PYTHON}, which has it",
                  file=sys.stderr)
            os.environ["TETHER_PLOT_REEXEC"] = "1"
            os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON, os.path.abspath(sys.argv[0])] + sys.argv[1:])
        line = (f"{tool}: matplotlib is missing: install Debian's python3-matplotlib (scripts/setup.sh does: "
                f"apt-get install python3-matplotlib) and run with {DEBIAN_PYTHON}")
        if required:
            sys.exit(line)
        print(line + "; no plots", file=sys.stderr)
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt
