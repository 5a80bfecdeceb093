// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux
import Glibc

/// The kernel's process events (the process connector, `<linux/cn_proc.h>`): a `NETLINK_CONNECTOR` socket bound to
/// the `CN_IDX_PROC` group and subscribed with `PROC_CN_MCAST_LISTEN`, on which the kernel tells of every fork,
/// exec and exit of the system. Only execs are read here: the pid and thread-group id of a process that has just
/// started another program; never the path (read /proc/PID/exe at once: the process may be gone).
///
/// Needs `CAP_NET_ADMIN` (bind fails with EPERM without it), and a socket of the initial network namespace (the
/// connector's kernel socket exists only there: elsewhere the subscription is refused with ECONNREFUSED). The pids
/// are the initial pid namespace's.
public enum ProcessEvents {
    /// An exec: `pid` the thread that called it, `tgid` the process (the two differ when a thread other than the
    /// leader execs; the kernel then makes it the leader).
    public struct Exec: Equatable, Sendable {
        public var pid: Int32
        public var tgid: Int32
        public init(pid: Int32, tgid: Int32) { self.pid = pid; self.tgid = tgid }
    }

    /// What one datagram said.
    public enum Event: Equatable, Sendable {
        case exec(Exec)
        /// The kernel's answer to the subscription (a `PROC_EVENT_NONE` whose error is 0 on success).
        case subscribed(error: UInt32)
        /// Another event (fork, exit, uid...), or bytes that are none: nothing to do.
        case other
    }

    /// A 4 MiB receive buffer: a compile's bursts of exec, fork and exit events must not overrun it while the loop
    /// is busy; the daemon reads only execs but the kernel sends every kind.
    public static let receiveBuffer: Int32 = 4 << 20

    /// Opens the socket, bound to the process group, subscribed, non-blocking and close-on-exec.
    public static func open(receiveBuffer: Int32 = receiveBuffer) throws(Errno) -> Int32 {
        let fd = try sys { socket(AF_NETLINK, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue),
                                  NP_NETLINK_CONNECTOR) }
        do {
            var size = receiveBuffer
            // SO_RCVBUFFORCE past rmem_max needs CAP_NET_ADMIN, which the socket needs anyway; fall back quietly.
            if setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, socklen_t(MemoryLayout<Int32>.size)) != 0 {
                _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            }
            // Only execs (and the subscription's answer) are queued: a compile's forks and exits are dropped in the
            // kernel (without the filter they are read and ignored, at three times the cost).
            if np_proc_events_filter(fd) != 0 {
                Log.debug("process events: no socket filter (\(Errno(errno))); every event is read")
            }
            var address = sockaddr_nl()
            address.nl_family = sa_family_t(AF_NETLINK)
            address.nl_groups = NP_CN_IDX_PROC
            _ = try sys {
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_nl>.size)) }
                }
            }
            let message = listenMessage()
            _ = try sys { message.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) } }
            return fd
        } catch {
            FD.close(fd)
            throw error
        }
    }

    /// The same, opened in the network namespace `path` names (nil: the caller's), which the calling thread enters
    /// only for the moment (setns needs CAP_SYS_ADMIN: for tests whose daemon has a namespace of its own).
    public static func open(inNamespace path: String?) throws(Errno) -> Int32 {
        guard let path else { return try open() }
        let own = try sys { Glibc.open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC) }
        defer { FD.close(own) }
        let target = try sys { Glibc.open(path, O_RDONLY | O_CLOEXEC) }
        defer { FD.close(target) }
        _ = try sys { setns(target, NP_CLONE_NEWNET) }
        defer { _ = setns(own, NP_CLONE_NEWNET) }
        return try open()
    }

    /// The subscription, as the kernel reads it: a netlink header, a `cn_msg` for the process connector, and the
    /// operation `PROC_CN_MCAST_LISTEN` as its 4 bytes of data.
    public static func listenMessage() -> [UInt8] {
        let total = Netlink.headerSize + Int(NP_CN_MSG_SIZE) + 4
        var b = [UInt8](repeating: 0, count: total)
        func put32(_ v: UInt32, at i: Int) { withUnsafeBytes(of: v) { for (k, x) in $0.enumerated() { b[i + k] = x } } }
        func put16(_ v: UInt16, at i: Int) { withUnsafeBytes(of: v) { for (k, x) in $0.enumerated() { b[i + k] = x } } }
        put32(UInt32(total), at: 0)
        put16(Netlink.typeDone, at: 4)
        let cn = Netlink.headerSize
        put32(NP_CN_IDX_PROC, at: cn)
        put32(NP_CN_VAL_PROC, at: cn + 4)
        put16(4, at: cn + Int(NP_CN_MSG_LEN_OFFSET))
        put32(NP_PROC_CN_MCAST_LISTEN, at: cn + Int(NP_CN_MSG_SIZE))
        return b
    }

    /// The events of one datagram: each netlink message's `cn_msg` from the process connector whose data holds a
    /// whole `proc_event`. Pure: bytes as the kernel lays them out in, events out; anything short or foreign is
    /// `.other`.
    public static func parse(_ datagram: UnsafeRawBufferPointer) -> [Event] {
        var out: [Event] = []
        forEach(in: datagram) { out.append($0) }
        return out
    }

    /// The same, each event given to `body` as it is read: nothing allocated (a compile's execs come by thousands a
    /// second).
    public static func forEach(in datagram: UnsafeRawBufferPointer, _ body: (Event) -> Void) {
        var messages = NetlinkMessages(datagram)
        while let m = messages.next() {
            body(event(m.payload))
        }
    }

    /// One `cn_msg` and the `proc_event` it carries.
    static func event(_ p: UnsafeRawBufferPointer) -> Event {
        let cnSize = Int(NP_CN_MSG_SIZE)
        guard p.count >= cnSize,
              p.loadUnaligned(fromByteOffset: 0, as: UInt32.self) == NP_CN_IDX_PROC,
              p.loadUnaligned(fromByteOffset: 4, as: UInt32.self) == NP_CN_VAL_PROC else { return .other }
        let length = Int(p.loadUnaligned(fromByteOffset: Int(NP_CN_MSG_LEN_OFFSET), as: UInt16.self))
        let data = UnsafeRawBufferPointer(rebasing: p[cnSize..<min(p.count, cnSize + length)])
        let dataOffset = Int(NP_PROC_EVENT_DATA_OFFSET)
        guard data.count >= dataOffset + 4 else { return .other }
        switch data.loadUnaligned(fromByteOffset: 0, as: UInt32.self) {
        case NP_PROC_EVENT_EXEC:
            let tgidOffset = Int(NP_PROC_EVENT_EXEC_TGID_OFFSET)
            guard data.count >= tgidOffset + 4 else { return .other }
            return .exec(Exec(pid: data.loadUnaligned(fromByteOffset: dataOffset, as: Int32.self),
                              tgid: data.loadUnaligned(fromByteOffset: tgidOffset, as: Int32.self)))
        case NP_PROC_EVENT_NONE:
            return .subscribed(error: data.loadUnaligned(fromByteOffset: dataOffset, as: UInt32.self))
        default:
            return .other
        }
    }

    /// A datagram as the kernel sends an exec event (for tests, and the bench's fake events).
    public static func execDatagram(pid: Int32, tgid: Int32) -> [UInt8] {
        datagram(what: NP_PROC_EVENT_EXEC) { data in
            withUnsafeBytes(of: pid) { for (k, x) in $0.enumerated() { data[Int(NP_PROC_EVENT_DATA_OFFSET) + k] = x } }
            withUnsafeBytes(of: tgid) { for (k, x) in $0.enumerated() { data[Int(NP_PROC_EVENT_EXEC_TGID_OFFSET) + k] = x } }
        }
    }

    /// A datagram of another kind of event (`what`), its data zero.
    public static func datagram(what: UInt32, fill: (inout [UInt8]) -> Void = { _ in }) -> [UInt8] {
        // struct proc_event: what, cpu, timestamp_ns, then a union of at most 24 bytes.
        var data = [UInt8](repeating: 0, count: Int(NP_PROC_EVENT_DATA_OFFSET) + 24)
        withUnsafeBytes(of: what) { for (k, x) in $0.enumerated() { data[k] = x } }
        fill(&data)
        let cnSize = Int(NP_CN_MSG_SIZE)
        var cn = [UInt8](repeating: 0, count: cnSize)
        withUnsafeBytes(of: NP_CN_IDX_PROC) { for (k, x) in $0.enumerated() { cn[k] = x } }
        withUnsafeBytes(of: NP_CN_VAL_PROC) { for (k, x) in $0.enumerated() { cn[4 + k] = x } }
        withUnsafeBytes(of: UInt16(data.count)) { for (k, x) in $0.enumerated() { cn[Int(NP_CN_MSG_LEN_OFFSET) + k] = x } }
        let total = Netlink.headerSize + cnSize + data.count
        var header = [UInt8](repeating: 0, count: Netlink.headerSize)
        withUnsafeBytes(of: UInt32(total)) { for (k, x) in $0.enumerated() { header[k] = x } }
        withUnsafeBytes(of: Netlink.typeDone) { for (k, x) in $0.enumerated() { header[4 + k] = x } }
        return header + cn + data
    }
}
