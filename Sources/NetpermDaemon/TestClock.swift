// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO

/// The wall clock's offset for tests (`--clock-offset-file`): seconds read from a file before each reading of the
/// usage counters, so that a test can start the next usage period without waiting a month, and optionally what the
/// machine says of the clock (`SECONDS synchronized|waiting|free`). Zero, and the machine's word, without the option.
public enum TestClock {
    /// Only the loop's thread reads and writes these.
    nonisolated(unsafe) public static var path: String?
    nonisolated(unsafe) static var offset = 0
    nonisolated(unsafe) static var trust: ClockTrust?

    public static func refresh() {
        guard let path, let text = FD.readText(path) else { return }
        let words = (text.split(separator: "\n").first ?? "").split(separator: " ")
        offset = words.first.flatMap { Int($0) } ?? offset
        trust = words.count > 1 ? ClockTrust(rawValue: String(words[1])) : nil
    }

    public static var now: Int { Clock.realtimeSeconds() + offset }

    /// Synchronized when systemd-timesyncd says so (`RUN/systemd/timesync/synchronized`) or the kernel's NTP status
    /// does; waiting while timesyncd runs without having synchronized; else free.
    public static func clockTrust(run: String) -> ClockTrust {
        if let trust { return trust }
        if FD.exists(run + "/systemd/timesync/synchronized") || Clock.kernelSynchronized() { return .synchronized }
        return FD.exists(run + "/systemd/timesync") ? .waiting : .free
    }
}
