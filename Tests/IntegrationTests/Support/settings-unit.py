#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The settings app's pure logic, alone (no window, no daemon): the choice a verdict is, what a choice decides, the
person's words for why not now, sizes, the protocol's line parsing and App Activity's summary of a report. Run by SettingsAppTests:

    settings-unit.py SETTINGS_DIR"""
import os
import sys
import time
import unittest

sys.path.insert(0, sys.argv.pop(1))
os.environ["LANG"] = "C.UTF-8"
import gi  # noqa: E402

gi.require_version("Gtk", "4.0")
gi.require_version("Adw", "1")
from netpermd_settings import bus, protocol, text, verdicts  # noqa: E402

KINDS = ("wifi", "wwan", "ethernet", "other")

from netpermd_settings import activity  # noqa: E402


def verdict(perms, sources=None, **extra):
    p = dict(zip(KINDS, perms))
    s = dict(zip(KINDS, sources or ["user-decision"] * 4))
    return dict({"app": "maps", "permissions": p, "sources": s}, **extra)


class Choices(unittest.TestCase):
    def test_each_choice_from_its_permissions(self):
        self.assertEqual(verdicts.choice_of(verdict(["allow"] * 4)), "all")
        self.assertEqual(verdicts.choice_of(verdict(["allow", "deny", "allow", "allow"])), "wifi")
        self.assertEqual(verdicts.choice_of(verdict(["deny"] * 4)), "off")

    def test_off_on_wifi_and_wwan_alone_is_not_off(self):
        # The old app's Off: Ethernet and other still open.
        self.assertEqual(verdicts.choice_of(verdict(["deny", "deny", "allow", "allow"])), "some")

    def test_denied_wifi_allowed_cellular_is_no_choice_of_the_three(self):
        self.assertEqual(verdicts.choice_of(verdict(["deny", "allow", "allow", "allow"])), "some")

    def test_undecided_asks_with_or_without_an_agent(self):
        self.assertEqual(verdicts.choice_of(verdict(["allow", "ask", "allow", "allow"])), "asks")
        self.assertEqual(verdicts.choice_of(verdict(["allow", "deny", "allow", "allow"],
                                                    ["policy", "no-agent", "policy", "policy"])), "asks")

    def test_the_policys_own_or_an_administrators_is_set_by_the_administrator(self):
        self.assertEqual(verdicts.choice_of(verdict(["allow"] * 4, ["policy"] * 4)), "admin")
        everyones = verdict(["allow"] * 4, ["decision"] * 4)
        self.assertEqual(verdicts.choice_of(everyones), "admin")
        self.assertEqual(verdicts.choice_of(everyones, privileged=True), "all", "root decides for everyone")

    def test_off_decides_every_kind_that_is_the_persons(self):
        self.assertEqual(verdicts.decisions_for(verdict(["allow"] * 4), "off"),
                         {"wifi": False, "wwan": False, "ethernet": False, "other": False})
        fixed = verdict(["allow", "ask", "allow", "allow"], ["policy", "no-agent", "policy", "policy"])
        self.assertFalse(verdicts.can_choose(fixed, "off"), "Wi-Fi is the policy's allow")
        self.assertTrue(verdicts.can_choose(fixed, "wifi"))
        self.assertEqual(verdicts.decisions_for(fixed, "wifi"), {"wwan": False})

    def test_for_everyone_every_kind_the_policy_leaves_whatever_the_persons_own(self):
        # The person's own deny says nothing of everyone's: Wi-Fi only for everyone still denies cellular.
        own = verdict(["allow", "deny", "allow", "allow"], ["policy", "user-decision", "policy", "policy"])
        self.assertEqual(verdicts.decisions_for(own, "wifi"), {})
        self.assertEqual(verdicts.decisions_for_everyone(own, "wifi"), {"wwan": False})
        # An administrator's decision for everyone is changed for everyone; the policy's and a budget's are not.
        everyones = verdict(["allow", "allow", "deny", "ask"], ["policy", "decision", "policy", "budget"])
        self.assertEqual(verdicts.decisions_for_everyone(everyones, "off"), {"wwan": False})


class Bus(unittest.TestCase):
    def test_the_bus_errors_are_the_sockets_codes(self):
        self.assertEqual(bus._code("org.netpermd.NetPerm1.Error.NotAuthorized"), "not-authorized")
        self.assertEqual(bus._code("org.netpermd.NetPerm1.Error.PermissionDenied"), "permission-denied")
        self.assertEqual(bus._code("org.freedesktop.DBus.Error.InteractiveAuthorizationRequired"), "not-authorized")
        self.assertEqual(bus._code("org.freedesktop.DBus.Error.ServiceUnknown"), "absent")
        self.assertEqual(bus._code("org.example.Other"), "failed")


class Words(unittest.TestCase):
    def test_why_from_reason_and_kinds_not_the_sentence(self):
        v = verdict(["deny"] * 4, reason="denied", denied_kinds=["wwan", "metered"], message="maps may not use wwan")
        self.assertEqual(text.why(v), "Not allowed on Cellular, Metered networks")
        ok = verdict(["allow"] * 4, available=True, reason="ok", via={"name": "wlan0", "kind": "wifi"})
        self.assertEqual(text.why(ok), "Connected by Wi-Fi")
        self.assertEqual(text.details(ok), "wlan0")
        spent = verdict(["allow"] * 4, reason="budget-exhausted", budget={"limit": 1 << 30})
        self.assertEqual(text.why(spent), "Used up its 1 GiB this month")
        self.assertEqual(text.why(verdict(["ask"] * 4, reason="awaiting-decision", pending_kinds=["wwan"])),
                         "Waiting for your answer")

    def test_sizes_are_iec_as_usage_md_reads_m_and_g(self):
        self.assertEqual(text.size(1024 * 1024), "1 MiB")
        self.assertEqual(text.size(1536), "1.5 KiB")
        self.assertEqual(text.size(200 * 1024 * 1024), "200 MiB")
        self.assertEqual(text.size(999), "999 B")

    def test_a_periods_end_is_its_last_day(self):
        self.assertEqual(text.day("2027-01-01", before=True), text.day("2026-12-31"))


class Lines(unittest.TestCase):
    def test_noise_and_shapes_are_faults_of_their_own(self):
        with self.assertRaises(protocol.ProtocolError) as e:
            protocol.parse_line(b"\xff\xfe{")
        self.assertEqual(e.exception.fault, protocol.Fault.NOISE)
        with self.assertRaises(protocol.ProtocolError) as e:
            protocol.parse_line(b"<html>")
        self.assertEqual(e.exception.fault, protocol.Fault.NOISE)
        with self.assertRaises(protocol.ProtocolError) as e:
            protocol.parse_line(b"[1, 2]")
        self.assertEqual(e.exception.fault, protocol.Fault.SHAPE)
        with self.assertRaises(protocol.ProtocolError) as e:
            protocol._verdict({"app": "maps", "permissions": []})
        self.assertEqual(e.exception.fault, protocol.Fault.SHAPE)


class Activity(unittest.TestCase):
    """App Activity from REPORT's answer: `refused` as PROTOCOL.md has it (counts by reason), as a list of refusals
    with a reason, or absent."""

    @staticmethod
    def place(host, kind, connections, refused=None, first=100, last=200):
        d = {"host": host, "kind": kind, "metered": False, "roaming": False, "first": first, "last": last,
             "connections": connections}
        if refused is not None:
            d["refused"] = refused
        return d

    def test_refusals_of_each_shape(self):
        self.assertEqual(activity.refusals(self.place("a", "wifi", 1, {"denied": 2, "ask": 0, "budget": 1})),
                         {"denied": 2, "budget": 1})
        self.assertEqual(activity.refusals(self.place("a", "wifi", 1, [{"reason": "ask", "at": 5}, {"reason": "ask"}])),
                         {"ask": 2})
        self.assertEqual(activity.refusals(self.place("a", "wifi", 1)), {})

    def test_a_place_is_one_line_whatever_its_links(self):
        app = {"app": "maps", "destinations": [self.place("tiles.example.org", "wifi", 3, first=100, last=150),
                                               self.place("tiles.example.org", "wwan", 2, {"ask": 1}, 90, 300),
                                               self.place("192.0.2.7", "wifi", 9)]}
        places = activity.places(app)
        self.assertEqual([p["host"] for p in places], ["192.0.2.7", "tiles.example.org"])
        tiles = places[1]
        self.assertEqual((tiles["connections"], tiles["refused"], tiles["first"], tiles["last"]), (5, {"ask": 1}, 90, 300))
        self.assertIn("Refused once: waiting for your answer", activity.place_line(tiles))
        self.assertEqual(activity.app_summary(app), "2 places · refused once")

    def test_apps_by_activity_and_the_most_contacted(self):
        report = {"apps": [{"app": "quiet", "destinations": [self.place("a.example", "wifi", 1)]},
                           {"app": "busy", "destinations": [self.place("a.example", "wifi", 5),
                                                            self.place("b.example", "wifi", 0, {"denied": 3})]},
                           {"app": "none", "destinations": []}]}
        self.assertEqual([a["app"] for a in activity.by_activity(report)], ["busy", "quiet"])
        self.assertEqual(activity.most_contacted(report, str.upper),
                         [("a.example", 6, ["QUIET", "BUSY"]), ("b.example", 3, ["BUSY"])])


class StepsOnTheMainLoop(unittest.TestCase):
    """steps.Steps: long work cut into idle callbacks of a few ms, one run at a time."""

    def run_loop(self, steps, seconds=5):
        from gi.repository import GLib
        loop, end = GLib.MainLoop(), time.monotonic() + seconds
        def check():
            if not steps.running or time.monotonic() > end:
                loop.quit()
                return False
            return True
        GLib.timeout_add(1, check)
        loop.run()

    def test_work_goes_in_steps_of_the_budget_and_ends_with_done(self):
        from gi.repository import GLib
        from netpermd_settings.steps import Steps
        calls, units, done = [], [], []
        steps = Steps(budget_ms=2)
        def work():
            for i in range(200):
                t = time.monotonic()
                while time.monotonic() - t < 0.0005:
                    pass
                units.append(i)
                yield
        steps.start(work(), lambda: done.append(len(units)))
        # Each step of ~2 ms: a beat every millisecond sees the loop free between them.
        GLib.timeout_add(1, lambda: calls.append(len(units)) or steps.running)
        self.run_loop(steps)
        self.assertEqual(done, [200])
        self.assertGreater(len(set(calls)), 10, "the loop ran between the steps")
        self.assertLess(max(b - a for a, b in zip(calls, calls[1:])), 20, "no step of more than ~2 ms of work")

    def test_a_break_ends_a_step_and_a_frame_without_a_window_is_a_break(self):
        from netpermd_settings.steps import Steps
        seen = []
        steps = Steps(clock=lambda: None, budget_ms=1000)
        def work():
            for i in range(3):
                seen.append(("unit", i))
                yield Steps.FRAME if i % 2 else Steps.BREAK
        original = steps._step
        steps._step = lambda g, d: seen.append("step") or original(g, d)
        steps.start(work())
        self.run_loop(steps)
        self.assertEqual(seen, ["step", ("unit", 0), "step", ("unit", 1), "step", ("unit", 2), "step"])

    def test_a_new_start_drops_the_run_before_it(self):
        from netpermd_settings.steps import Steps
        done = []
        steps = Steps()
        def work(name):
            for _ in range(3):
                yield Steps.BREAK
            done.append(name)
        steps.start(work("old"), lambda: done.append("old done"))
        steps.start(work("new"), lambda: done.append("new done"))
        self.run_loop(steps)
        self.assertEqual(done, ["new", "new done"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
