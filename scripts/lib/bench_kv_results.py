"""tether-bench kv and kv_bench results, for the tables of scripts/bench_pslite.sh
and scripts/bench_key_lists.sh.

A run's file holds lines "RESULT KEYS DIM PUSH_MS PULL_MS ..."; a job ran
once per round into WORK/JOB-rR.txt (R = 1..rounds).
"""
import statistics


def load(work, job, rounds):
    """{(keys, dim): (push ms, pull ms)}: per shape, the medians over the rounds."""
    out = {}  # (keys, dim) -> ([push ms], [pull ms])
    for r in range(1, rounds + 1):
        with open(f"{work}/{job}-r{r}.txt") as f:
            for line in f:
                fields = line.split()
                if fields and fields[0] == "RESULT":
                    push, pull = out.setdefault((int(fields[1]), int(fields[2])), ([], []))
                    push.append(float(fields[3]))
                    pull.append(float(fields[4]))
    return {k: (statistics.median(a), statistics.median(b)) for k, (a, b) in out.items()}


def ms(v):
    """Milliseconds with 3 significant-ish digits: 0.049, 31.0, 140."""
    return f"{v:.3f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def shape_of(text):
    """"100000x64" -> (100000, 64)."""
    n, d = (int(float(x)) for x in text.split("x"))
    return n, d
