"""Process figures every measurement reports the same way: the workbench's peak memory per take, the
benches, and the reference scripts other interpreters run from peers/ (standard
library only, so those can import it by path)."""
import os
import resource


def reset_peak_rss() -> None:
    """Starts the peak-RSS count afresh (Linux: clear_refs 5), so earlier work is not counted."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _status_mb(field: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def peak_rss_mb() -> float:
    """Peak resident memory of this process since it started or since reset_peak_rss() (VmHWM; not
    ru_maxrss, which a child inherits from its parent's peak across fork and exec)."""
    peak = _status_mb("VmHWM")
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    """Resident memory of this process now (VmRSS; 0 where /proc is missing)."""
    return _status_mb("VmRSS") or 0.0


def machine_busy_seconds():
    """CPU seconds the whole machine has been busy (/proc/stat), or None: tells how loaded a run was."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
