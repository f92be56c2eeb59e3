"""The measured child process: one preview (or the baseline program), then its own peak RSS."""

from __future__ import annotations

import argparse
import json
import pstats
import resource
import sys
from pathlib import Path
from typing import Any

from benchmarks.settings import BASELINE_PROGRAM, SDK_MODULE


def _sdk_modules() -> list[str]:
    return sorted(name for name in sys.modules if SDK_MODULE.match(name))


class AllThreadsProfile:
    """cProfile of the main thread and of every thread started while it runs.

    Under the mock monitor the SDK runs RegisterResource in executor threads, and Python 3.11's cProfile only
    sees the thread that enabled it: without this, the SDK's per-resource work would be invisible. (From 3.12
    cProfile is built on sys.monitoring and already covers every thread.)
    """

    def __init__(self) -> None:
        import cProfile

        self._new = cProfile.Profile
        self.main = cProfile.Profile()
        self.threads: list[cProfile.Profile] = []

    def _thread_started(self, frame: Any, event: str, arg: Any) -> None:
        profile = self._new()
        self.threads.append(profile)
        profile.enable()  # replaces this hook for the new thread

    def start(self) -> None:
        import threading

        if sys.version_info < (3, 12):
            threading.setprofile(self._thread_started)
        self.main.enable()

    def stop(self, path: Path) -> None:
        import threading

        self.main.disable()
        threading.setprofile(None)
        stats = pstats.Stats(self.main)
        for profile in self.threads:
            stats.add(profile)
        stats.dump_stats(str(path))


def run_child(args: argparse.Namespace) -> int:
    """One measured run: the preview (or the baseline through the same runner), then its own peak RSS."""
    profiler = AllThreadsProfile() if args.profile else None
    if profiler is not None:
        profiler.start()
    if args.child == "preview":
        from offline.preview import main as preview_main

        command = ["--stack-dir", str(args.stack_dir), "--stack", args.stack, "--out", str(args.out), "--quiet"]
        code = preview_main(command)
    else:
        # What offline/preview.py does, with the baseline program in place of __main__.py.
        from offline.render import write_all
        from offline.runner import PROJECT, read_stack_file, run_stack

        config = read_stack_file(args.stack, args.stack_dir)
        recording = run_stack(args.stack, config=config, secrets={}, program=BASELINE_PROGRAM)
        write_all(recording, args.out, PROJECT, args.stack, [])
        code = 0
    if profiler is not None:
        profiler.stop(args.profile)
    report = {
        "exit": code,
        "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "sdk_modules": _sdk_modules(),
    }
    args.report.write_text(json.dumps(report), encoding="utf-8")
    return int(code)
