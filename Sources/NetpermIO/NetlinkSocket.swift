// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux
import Glibc

/// Why a netlink request got no answer.
public enum NetlinkFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// The kernel refused the request with this errno.
    case kernel(Errno)
    /// The socket itself failed (sending, receiving, or no answer in time: ETIMEDOUT).
    case socket(Errno)
    /// A dump's table changed while it was read (NLM_F_DUMP_INTR): read it again.
    case interrupted
    /// A datagram was longer than the buffer, now grown to `bytes`: the answer is lost, ask again.
    case truncated(bytes: Int)
    /// A message's length does not fit its datagram, or an answer is not what the request calls for.
    case malformed

    public var description: String {
        switch self {
        case let .kernel(e): return "\(e)"
        case let .socket(e): return "\(e)"
        case .interrupted: return "the table changed while it was read"
        case let .truncated(n): return "an answer of \(n) bytes was cut"
        case .malformed: return "a malformed answer"
        }
    }

    /// The errno of a refusal or a socket's failure; nil for the others.
    public var errno: Errno? {
        switch self {
        case let .kernel(e), let .socket(e): return e
        case .interrupted, .truncated, .malformed: return nil
        }
    }
}

/// A netlink socket of the daemon's own: requests out, and of what comes back only the messages that answer them,
/// matched by the request's sequence number and this socket's port (the kernel addresses its answers to it), so
/// a late answer to an earlier request or a notification is never taken for the answer. Reads straight into one
/// buffer that grows to fit.
public final class NetlinkSocket {
    public let fd: Int32
    /// The port the kernel bound the socket to (its nl_pid).
    public let port: UInt32
    private var sequence: UInt32
    private var buffer = [UInt8](repeating: 0, count: 65536)

    /// `groups`: the multicast groups (a bit mask, as `sockaddr_nl.nl_groups`) it receives.
    public init(protocol proto: Int32, groups: UInt32 = 0, nonBlocking: Bool = false) throws(Errno) {
        let type = Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
        let fd = try sys { socket(AF_NETLINK, type, proto) }
        do throws(Errno) {
            var addr = sockaddr_nl()
            addr.nl_family = sa_family_t(AF_NETLINK)
            addr.nl_groups = groups
            _ = try sys { withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_nl>.size)) }
            } }
            var length = socklen_t(MemoryLayout<sockaddr_nl>.size)
            _ = try sys { withUnsafeMutablePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            } }
            port = addr.nl_pid
        } catch {
            FD.close(fd)
            throw error
        }
        self.fd = fd
        // As libnl does: sequences of two sockets made one after the other need not start alike.
        sequence = UInt32(truncatingIfNeeded: Clock.monotonicMicroseconds())
    }

    deinit { FD.close(fd) }

    /// NETLINK_GET_STRICT_CHK: the kernel checks a dump request's header and takes its attributes as filters (a
    /// route dump's RTA_TABLE: that table alone), where it would otherwise ignore them and dump everything.
    public func checkStrictly() throws(Errno) {
        var on: Int32 = 1
        _ = try sys { setsockopt(fd, SOL_NETLINK, NETLINK_GET_STRICT_CHK, &on, socklen_t(MemoryLayout<Int32>.size)) }
    }

    /// What the handler makes of one message of an answer.
    public enum Step { case more, done }

    /// Sends `request` and hands each message answering it to `handle`, until the handler says done, a dump ends
    /// (NLMSG_DONE) or an acknowledgement comes; an error answer is thrown. `timeoutMilliseconds` bounds each wait
    /// for a datagram (nil: the kernel answers at once, so the socket is read as it is).
    public func request(_ request: NetlinkRequest, timeoutMilliseconds: Int32? = nil,
                        _ handle: (NetlinkMessage) -> Step = { _ in .more }) throws(NetlinkFailure) {
        let seq = nextSequence()
        try send(request.message(sequence: seq, port: port))
        while true {
            let n = try receive(timeoutMilliseconds)
            let step = try buffer.withUnsafeBytes { b in Result { () throws(NetlinkFailure) -> Step in
                var messages = NetlinkMessages(UnsafeRawBufferPointer(rebasing: b[..<n]))
                while let m = messages.next() {
                    guard m.sequence == seq, m.port == port else { continue }
                    switch m.type {
                    case Netlink.typeError:
                        guard let e = m.errorCode else { throw .malformed }
                        if e != 0 { throw .kernel(Errno(e)) }
                        return .done
                    case Netlink.typeDone:
                        return .done
                    default:
                        if m.flags & Netlink.flagDumpInterrupted != 0 { throw .interrupted }
                        if case .done = handle(m) { return .done }
                    }
                }
                if messages.malformed { throw .malformed }
                return .more
            } }.get()
            if case .done = step { return }
        }
    }

    /// Sends `requests` in one datagram (the kernel handles each message of it in turn) and hands each one's single
    /// answer, a reply or an error message, to `handle` with the request's index: for requests answered by one
    /// message (route lookups, the messages of an nf_tables batch). `unanswered`: the indexes of requests the
    /// kernel answers only when it refuses the whole datagram (a batch's begin and end): not waited for, and an
    /// answer to one, handed over too, ends the wait. `timeoutMilliseconds` bounds each wait.
    public func exchange(_ requests: [NetlinkRequest], unanswered: Set<Int> = [], timeoutMilliseconds: Int32? = nil,
                         _ handle: (Int, NetlinkMessage) -> Void) throws(NetlinkFailure) {
        guard !requests.isEmpty else { return }
        var datagram: [UInt8] = []
        var index: [UInt32: Int] = [:], refusals: [UInt32: Int] = [:]
        for (i, r) in requests.enumerated() {
            let seq = nextSequence()
            if unanswered.contains(i) { refusals[seq] = i } else { index[seq] = i }
            datagram += r.message(sequence: seq, port: port)
        }
        try send(datagram)
        while !index.isEmpty {
            let n = try receive(timeoutMilliseconds)
            buffer.withUnsafeBytes { b in
                for m in NetlinkMessages(UnsafeRawBufferPointer(rebasing: b[..<n])) where m.port == port {
                    // A late answer to an earlier request is skipped.
                    if let i = index.removeValue(forKey: m.sequence) {
                        handle(i, m)
                    } else if let i = refusals[m.sequence] {
                        handle(i, m)
                        index.removeAll()
                    }
                }
            }
        }
    }

    private func nextSequence() -> UInt32 {
        sequence &+= 1
        if sequence == 0 { sequence = 1 }
        return sequence
    }

    private func send(_ bytes: [UInt8]) throws(NetlinkFailure) {
        do throws(Errno) {
            _ = try bytes.withUnsafeBytes { b in
                Result { () throws(Errno) -> Int in try sys { Glibc.send(fd, b.baseAddress, b.count, 0) } }
            }.get()
        } catch {
            throw .socket(error)
        }
    }

    /// One datagram into `buffer`; its length. One longer than the buffer is lost (the buffer grows for the next).
    private func receive(_ timeoutMilliseconds: Int32?) throws(NetlinkFailure) -> Int {
        let n: Int
        do throws(Errno) {
            if let timeoutMilliseconds, try FD.wait(fd, for: Int16(POLLIN), timeoutMilliseconds: timeoutMilliseconds) == 0 {
                throw Errno(ETIMEDOUT)
            }
            n = try buffer.withUnsafeMutableBytes { b in
                Result { () throws(Errno) -> Int in try sys { recv(fd, b.baseAddress, b.count, Int32(MSG_TRUNC)) } }
            }.get()
        } catch {
            throw .socket(error)
        }
        guard n <= buffer.count else {
            buffer = [UInt8](repeating: 0, count: n)
            throw .truncated(bytes: n)
        }
        return n
    }
}
