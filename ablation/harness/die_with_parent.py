"""Run a harness so that it, and everything it starts, ends when the runner that started it dies.

Runs in the leg's venv (standard library only) as the task's process-group leader, with the
harness as its child in the same group. A runner killed outright (SIGKILL, the OOM killer, a
Ray worker whose driver died) cannot end its task, and vLLM's engine processes would outlive a
killed harness and keep the GPUs. PR_SET_PDEATHSIG sends this process SIGTERM when the runner
dies; it then SIGKILLs the whole group. A SIGTERM while the runner lives is the runner's own
timeout kill of the group: the harness gets it too and shuts down as it would without us.
The harness's exit status is passed on unchanged (a signal death as the same signal).
Usage: python die_with_parent.py HARNESS TASK_JSON
"""

import ctypes
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1


def main() -> None:
    runner = int(os.environ.get("ABLATION_RUNNER_PID") or 0)

    def runner_gone() -> bool:
        return bool(runner) and os.getppid() != runner

    def on_term(signum, frame):
        if runner_gone():
            os.killpg(0, signal.SIGKILL)  # nothing else will end this group now

    signal.signal(signal.SIGTERM, on_term)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass  # not Linux: a resumed local run still ends the group by its recorded pid
    if runner_gone():
        sys.exit("die_with_parent: the runner died before the harness started")
    code = subprocess.call([sys.executable, *sys.argv[1:]])
    if code < 0:  # died by a signal: die by the same one, so the runner attributes it the same way
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


if __name__ == "__main__":
    main()
