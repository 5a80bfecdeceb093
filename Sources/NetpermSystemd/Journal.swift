// SPDX-License-Identifier: LGPL-2.1-or-later
import CSystemd
import Glibc
import NetpermIO

/// The journal's native protocol (sd_journal_sendv): a line with fields of its own, where stderr is the journal.
public enum Journal {
    /// Whether stderr is the stream the service manager connected to the journal: `JOURNAL_STREAM` (DEVICE:INODE)
    /// names it, as systemd.exec(5) says to check before speaking the native protocol instead.
    public static var connectedToStderr: Bool {
        guard let stream = getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else { return false }
        let parts = stream.split(separator: ":")
        var st = stat()
        guard parts.count == 2, let dev = UInt64(parts[0]), let ino = UInt64(parts[1]), fstat(STDERR_FILENO, &st) == 0
        else { return false }
        return UInt64(st.st_dev) == dev && UInt64(st.st_ino) == ino
    }

    /// MESSAGE=, PRIORITY=, SYSLOG_IDENTIFIER= and `fields`. Falls back to the stderr line if the journal refuses it.
    public static func send(priority: Int32, message: String, fields: [(String, String)]) {
        var items = ["MESSAGE=" + message, "PRIORITY=\(priority)", "SYSLOG_IDENTIFIER=netpermd"]
        for (name, value) in fields { items.append(name + "=" + value) }
        let buffers = items.map { Array($0.utf8) }
        let r = withIOVecs(buffers) { iov in sd_journal_sendv(iov.baseAddress, Int32(iov.count)) }
        if r < 0 { Output.write(STDERR_FILENO, "<\(priority)>\(message)\n") }
    }

    private static func withIOVecs<R>(_ buffers: [[UInt8]], _ body: (UnsafeMutableBufferPointer<iovec>) -> R) -> R {
        var iov = [iovec](repeating: iovec(), count: buffers.count)
        func fill(_ i: Int) -> R {
            guard i < buffers.count else { return iov.withUnsafeMutableBufferPointer { body($0) } }
            return buffers[i].withUnsafeBytes { b in
                iov[i] = iovec(iov_base: UnsafeMutableRawPointer(mutating: b.baseAddress), iov_len: b.count)
                return fill(i + 1)
            }
        }
        return fill(0)
    }
}
