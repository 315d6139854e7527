"""A pid's identity is its start in clock ticks since boot, on real processes."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil

from roost.system.procstart import process_identity, same_process, start_ticks


def test_identity_is_the_kernels_start_ticks() -> None:
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as child:
        try:
            ident = process_identity(child.pid)
            assert ident is not None and ident == start_ticks(child.pid)
            assert same_process(child.pid, ident)
            assert not same_process(child.pid, ident + 1)  # another start: another process
            # An older record (psutil's create time) is still recognised.
            assert same_process(child.pid, psutil.Process(child.pid).create_time())
            child.kill()
            # Dead but not yet reaped (a zombie) is not a live process any more.
            os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
            assert not same_process(child.pid, ident)
        finally:
            child.kill()
    assert not same_process(child.pid, ident)
    assert process_identity(child.pid) is None
    assert process_identity(None) is None and not same_process(None, 1.0) and not same_process(os.getpid(), None)
