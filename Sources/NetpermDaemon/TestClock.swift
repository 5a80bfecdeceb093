// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermIO

/// The wall clock's offset for tests (`--clock-offset-file`): seconds read from a file before each reading of the
/// usage counters, so that a test can start the next usage period without waiting a month. Zero without the option.
public enum TestClock {
    /// Only the loop's thread reads and writes these.
    nonisolated(unsafe) public static var path: String?
    nonisolated(unsafe) static var offset = 0

    public static func refresh() {
        guard let path, let text = FD.readText(path) else { return }
        offset = Int(text.split(separator: "\n").first.map(String.init) ?? "") ?? offset
    }

    public static var now: Int { Clock.realtimeSeconds() + offset }
}
