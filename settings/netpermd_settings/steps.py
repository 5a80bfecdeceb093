# SPDX-License-Identifier: LGPL-2.1-or-later
"""Long work on the main loop cut into steps: a generator run in idle callbacks, each holding the loop for at most
`BUDGET_MS` of wall-clock time (a frame, input and the daemon's lines get their turn between two), so nothing on the
main loop takes over 50 ms even when the machine's other load stretches the work."""
import time

from gi.repository import Gdk, GLib

# A step's wall-clock time: small against the 50 ms no callback may take, even with a unit that overruns it.
BUDGET_MS = 4.0
# The longest wait for a frame (a window not shown draws none).
FRAME_MS = 100


class Steps:
    """One run of a generator at a time: `start` drops the one running (its work is outdated), `done` is called once
    the generator ends. A generator yields after each unit of work; `yield Steps.BREAK` ends the step at once, and
    `yield Steps.FRAME` waits for the window's next frame too (`clock()`: its Gdk.FrameClock): rows made or changed
    are laid out in the frame after, and a frame that lays out 200 rows at once takes 20-30 ms."""

    BREAK = object()
    FRAME = object()

    def __init__(self, clock=None, budget_ms=BUDGET_MS):
        self.clock = clock
        self.budget = budget_ms / 1000
        self.source = None
        self.waiting = None     # (clock, its after-paint handler) while waiting for a frame

    @property
    def running(self):
        return self.source is not None

    def start(self, generator, done=None):
        self.stop()
        self.source = GLib.idle_add(self._step, generator, done)

    def stop(self):
        if self.waiting is not None:
            clock, handler = self.waiting
            clock.disconnect(handler)
            self.waiting = None
        if self.source is not None:
            GLib.source_remove(self.source)
            self.source = None

    def _step(self, generator, done):
        end = time.monotonic() + self.budget
        for unit in generator:
            if unit is Steps.FRAME and self._after_frame(generator, done):
                return False
            if unit is Steps.BREAK or unit is Steps.FRAME or time.monotonic() >= end:
                return True
        self.source = None
        if done is not None:
            done()
        return False

    def _after_frame(self, generator, done):
        clock = self.clock() if self.clock is not None else None
        if clock is None:
            return False

        def resume(*_args):
            self.stop()
            self.source = GLib.idle_add(self._step, generator, done)
            return False
        self.waiting = (clock, clock.connect("after-paint", resume))
        self.source = GLib.timeout_add(FRAME_MS, resume)
        clock.request_phase(Gdk.FrameClockPhase.AFTER_PAINT)
        return True
