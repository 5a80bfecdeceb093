// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO

/// The wall clock as the daemon reads it, made once and handed to the engine and the interpreter: the machine's,
/// shifted for tests by `--clock-offset-file` (seconds read from the file before each reading of the usage counters,
/// so that a test can start the next usage period without waiting a month, and optionally what the machine says of
/// the clock: `SECONDS synchronized|waiting|free`). Read and refreshed on the loop's thread only.
public final class WallClock: @unchecked Sendable {
    private let offsetFile: String?
    private var offset = 0
    private var trust: ClockTrust?

    public init(offsetFile: String? = nil) {
        self.offsetFile = offsetFile
        refresh()
    }

    /// Reads the offset file again (nothing without one).
    public func refresh() {
        guard let offsetFile, let text = FD.readText(offsetFile) else { return }
        let words = (text.split(separator: "\n").first ?? "").split(separator: " ")
        offset = words.first.flatMap { Int($0) } ?? offset
        trust = words.count > 1 ? ClockTrust(rawValue: String(words[1])) : nil
    }

    public var now: Int { Clock.realtimeSeconds() + offset }

    /// Synchronized when systemd-timesyncd says so (`RUN/systemd/timesync/synchronized`) or the kernel's NTP status
    /// does; waiting while timesyncd runs without having synchronized; else free.
    public func trust(run: String) -> ClockTrust {
        if let trust { return trust }
        if FD.exists(run + "/systemd/timesync/synchronized") || Clock.kernelSynchronized() { return .synchronized }
        return FD.exists(run + "/systemd/timesync") ? .waiting : .free
    }
}
