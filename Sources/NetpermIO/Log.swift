// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux
import Glibc

/// One line per event worth a human's attention, on stderr with a syslog priority prefix (`<6>`), which journald
/// reads. Priorities are syslog's numbers: 3 err, 4 warning, 5 notice, 6 info, 7 debug. Single-threaded, like the
/// rest of the daemon.
public enum Log {
    /// Lines with a larger number (less important) are dropped before they are formatted.
    public nonisolated(unsafe) static var maxPriority: Int32 = 6
    /// Where each formatted line goes: stderr, where journald reads it (the daemon library's tests collect them).
    public nonisolated(unsafe) static var sink: (String) -> Void = { Output.write(STDERR_FILENO, $0) }
    /// Set when stderr is the journal's stream (`Journal.connectedToStderr`): lines go to the journal natively, with
    /// their fields (APP=, INTERFACE=, UID=), so that `journalctl APP=maps` finds them.
    public nonisolated(unsafe) static var journal: ((Int32, String, [(String, String)]) -> Void)?

    /// Messages are autoclosures: a line below the level is never formatted (link changes log at info).
    public static func emit(_ priority: Int32, _ message: @autoclosure () -> String, fields: [(String, String)] = []) {
        guard priority <= maxPriority else { return }
        if let journal { return journal(priority, message(), fields) }
        // One write(2) per line: lines from a crash-looping daemon never interleave half-way.
        sink("<\(priority)>\(message())\n")
    }

    /// What C libraries print with stdio's `stderr` (libnftables on some failures), from now on logged at err, a line
    /// each, as "library: ..." (journald would file a bare line at the unit's default level). Called once, before any
    /// thread starts; the stream is never swapped back.
    public static func takeLibraryLines() {
        _ = np_stderr_lines_to { bytes, count in
            guard let bytes, count > 0 else { return }
            let text = String(decoding: UnsafeRawBufferPointer(start: bytes, count: count), as: UTF8.self)
            for line in text.split(separator: "\n") where !line.isEmpty { Log.err("library: " + line) }
        }
    }

    public static func err(_ m: @autoclosure () -> String) { emit(3, m()) }
    public static func warning(_ m: @autoclosure () -> String) { emit(4, m()) }
    public static func notice(_ m: @autoclosure () -> String) { emit(5, m()) }
    public static func info(_ m: @autoclosure () -> String) { emit(6, m()) }
    public static func debug(_ m: @autoclosure () -> String) { emit(7, m()) }
}

/// Unbuffered writes to stdout/stderr (the C stdio globals are not concurrency-safe in Swift 6).
public enum Output {
    public static func write(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { b in try? sys { Glibc.write(fd, b.baseAddress! + off, b.count - off) } }
            guard let n, n > 0 else { return }
            off += n
        }
    }
    public static func out(_ text: String) { write(STDOUT_FILENO, text) }
    public static func err(_ text: String) { write(STDERR_FILENO, text) }
}

/// A line about something that can happen thousands of times a second (descriptors running out, clients refused):
/// at most one per `interval`; the next one says how many were left out meanwhile. A client must not be able to
/// fill the journal.
public struct RateLimitedLog {
    public let interval: UInt64
    private var last: UInt64?
    /// Lines left out since the last one written.
    public private(set) var suppressed = 0

    public init(intervalMicroseconds: UInt64) { interval = intervalMicroseconds }

    public mutating func emit(_ priority: Int32, _ message: @autoclosure () -> String,
                              now: UInt64 = Clock.monotonicMicroseconds()) {
        if let last, now &- last < interval {
            suppressed += 1
            return
        }
        last = now
        let left = suppressed
        suppressed = 0
        Log.emit(priority, message() + (left > 0 ? " (\(left) more like it not logged)" : ""))
    }
}
