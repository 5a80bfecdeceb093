import Glibc

/// Syslog priorities; on stderr they become `<N>` prefixes, which journald reads.
public enum LogLevel: Int32, Sendable, Comparable, CaseIterable {
    case err = 3, warning = 4, notice = 5, info = 6, debug = 7

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }

    public init?(name: String) {
        switch name.lowercased() {
        case "err", "error": self = .err
        case "warning", "warn": self = .warning
        case "notice": self = .notice
        case "info": self = .info
        case "debug": self = .debug
        default: return nil
        }
    }
}

/// One line per event worth a human's attention. Single-threaded, like the rest of the daemon.
public final class Log {
    public nonisolated(unsafe) static var level: LogLevel = .info

    /// Messages are autoclosures: a line below the level is never formatted (link changes log at info).
    public static func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        guard level <= Log.level else { return }
        let line = "<\(level.rawValue)>\(message())\n"
        // One write(2) per line: lines from a crash-looping daemon never interleave half-way.
        Output.write(STDERR_FILENO, line)
    }

    public static func err(_ m: @autoclosure () -> String) { log(.err, m()) }
    public static func warning(_ m: @autoclosure () -> String) { log(.warning, m()) }
    public static func notice(_ m: @autoclosure () -> String) { log(.notice, m()) }
    public static func info(_ m: @autoclosure () -> String) { log(.info, m()) }
    public static func debug(_ m: @autoclosure () -> String) { log(.debug, m()) }
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
