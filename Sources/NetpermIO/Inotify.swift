// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux
import Glibc

/// An inotify instance of its own, for a thread that reads its events itself (the loop's watches go through the
/// EventLoop): directories watched by descriptor, entries made in them read as bytes.
public final class Inotify {
    public let fd: Int32

    public init() throws(Errno) {
        fd = try sys { inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)) }
    }

    deinit { FD.close(fd) }

    /// Watches the directory `dir` (a descriptor) for entries made in it; the watch's number (the same for a
    /// directory watched twice).
    public func watchMade(directory dir: Int32) throws(Errno) -> Int32 {
        try sys { inotify_add_watch(fd, "/proc/self/fd/\(dir)", UInt32(NP_IN_ENTRY_MADE) | UInt32(IN_ONLYDIR)) }
    }

    /// Watches `path` for the events in `mask`; the watch's number (the same for a path watched twice).
    public func watch(path: String, mask: UInt32) throws(Errno) -> Int32 {
        try sys { inotify_add_watch(fd, path, mask) }
    }

    public func remove(_ watch: Int32) { _ = inotify_rm_watch(fd, watch) }

    /// One event: its watch, and the entry's name as the kernel has it (empty for the directory itself).
    public struct Event {
        public var watch: Int32
        public var mask: UInt32
        public var name: [UInt8]
        /// The queue overflowed: events were lost.
        public var overflowed: Bool { mask & UInt32(IN_Q_OVERFLOW) != 0 }
        /// The watch is gone (its directory removed, or the watch removed).
        public var ignored: Bool { mask & UInt32(IN_IGNORED) != 0 }
    }

    /// The largest read buffer: a name the kernel accepts is shorter than a path (PATH_MAX), so one event fits many
    /// times over.
    static let largestRead = 1 << 20

    /// The events of one read: at most about `bytes`' worth of those queued (none: the queue is empty). An event
    /// larger than the buffer (read(2) then says EINVAL) is read again with a buffer large enough: cgroupfs accepts
    /// names longer than NAME_MAX, so an event's size is not bounded by it.
    public func read(bytes: Int) throws(Errno) -> [Event] {
        var size = max(bytes, MemoryLayout<inotify_event>.size + Int(NAME_MAX) + 1)
        var buffer: [UInt8]
        var n: Int
        while true {
            buffer = [UInt8](repeating: 0, count: size)
            let fd = self.fd
            let got: Result<Int?, Errno> = buffer.withUnsafeMutableBytes { b in
                Result { () throws(Errno) in try sysNonBlocking { Glibc.read(fd, b.baseAddress, b.count) } }
            }
            switch got {
            case let .success(count):
                guard let count, count > 0 else { return [] }
                n = count
            case let .failure(e) where e.code == EINVAL && size < Self.largestRead:
                size = min(size * 4, Self.largestRead)
                continue
            case let .failure(e):
                throw e
            }
            break
        }
        var events: [Event] = []
        buffer.withUnsafeBytes { b in
            var at = 0
            let header = MemoryLayout<inotify_event>.size
            while at + header <= n {
                let e = b.loadUnaligned(fromByteOffset: at, as: inotify_event.self)
                // The name is NUL-padded to e.len: its length by strnlen, its bytes copied at once. A byte-by-byte
                // copy was half the loop's time while users made and removed thousands of long-named cgroups.
                let start = min(n, at + header), room = min(n, at + header + Int(e.len)) - start
                let name = b.baseAddress!.advanced(by: start).assumingMemoryBound(to: CChar.self)
                events.append(Event(watch: e.wd, mask: e.mask,
                                    name: Array(UnsafeRawBufferPointer(start: name, count: strnlen(name, room)))))
                at += header + Int(e.len)
            }
        }
        return events
    }
}
