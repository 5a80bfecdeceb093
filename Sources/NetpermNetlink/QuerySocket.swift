// SPDX-License-Identifier: LGPL-2.1-or-later
import CNetlink
import Glibc
import NetpermIO

/// A netlink socket for requests (dumps, route lookups, changes to steering's rules and tables, nl80211), one at a time,
/// over NetpermIO's netlink layer: each answer matched by its sequence number and the socket's port, read straight
/// into one buffer (libnl's reader peeks at every datagram first, a second system call each). The messages are
/// handed over as `nlmsghdr`s for libnl's attribute parsers.
final class QuerySocket {
    private let socket: NetlinkSocket

    /// `proto`: NETLINK_ROUTE, or NETLINK_GENERIC for nl80211.
    /// `strict`: dump requests' attributes filter (NetlinkSocket.checkStrictly).
    init(protocol proto: Int32 = NETLINK_ROUTE, strict: Bool = false) throws(NetlinkError) {
        do {
            socket = try NetlinkSocket(protocol: proto)
            if strict { try socket.checkStrictly() }
        } catch {
            throw NetlinkError(code: -NLE_FAILURE, operation: "opening a netlink socket for requests (\(error))")
        }
    }

    typealias Step = NetlinkSocket.Step

    /// Sends `type` with `body` (the fixed header) and the attributes `attributes` adds, and passes each message of
    /// the answer to `handle` until it says done, the dump ends (NLMSG_DONE), the kernel acknowledges, or it
    /// answers with an error (thrown, with its errno).
    func request(type: Int32, flags: Int32 = 0, body: UnsafeRawBufferPointer,
                 attributes: (inout NetlinkRequest) -> Void = { _ in },
                 handle: (UnsafeMutablePointer<nlmsghdr>) -> Step) throws(NetlinkError) {
        var r = NetlinkRequest(type: UInt16(type), flags: UInt16(flags))
        r.append(header: body)
        attributes(&r)
        do throws(NetlinkFailure) {
            try socket.request(r) { handle(Self.header($0)) }
        } catch {
            throw Self.error(error, "reading an answer")
        }
    }

    /// Sends `count` requests of `type` in one datagram (the kernel handles each message of it in turn) and passes
    /// each request's one answer, a reply or an error message, to `handle` with the request's index. For requests
    /// answered by a single message (route lookups); `build` adds request `i`'s fixed header and attributes.
    func exchange(count: Int, type: Int32, build: (Int, inout NetlinkRequest) -> Void,
                  handle: (Int, UnsafeMutablePointer<nlmsghdr>) -> Void) throws(NetlinkError) {
        let requests = (0..<count).map { i in
            var r = NetlinkRequest(type: UInt16(type), flags: 0)
            build(i, &r)
            return r
        }
        do throws(NetlinkFailure) {
            try socket.exchange(requests) { i, m in handle(i, Self.header(m)) }
        } catch {
            throw Self.error(error, "reading answers")
        }
    }

    private static func header(_ m: NetlinkMessage) -> UnsafeMutablePointer<nlmsghdr> {
        UnsafeMutableRawPointer(mutating: m.start).assumingMemoryBound(to: nlmsghdr.self)
    }

    private static func error(_ f: NetlinkFailure, _ operation: String) -> NetlinkError {
        switch f {
        case let .kernel(e): return NetlinkError(code: -NLE_FAILURE, operation: "the kernel's answer", errno: e.code)
        case let .socket(e): return NetlinkError(code: -NLE_FAILURE, operation: "\(operation) (\(e))")
        case .interrupted: return NetlinkError(code: -NLE_DUMP_INTR, operation: "a dump (changed while read)")
        case let .truncated(n): return NetlinkError(code: -NLE_MSG_TRUNC, operation: "\(operation) (\(n) bytes, buffer grown)")
        case .malformed: return NetlinkError(code: -NLE_PARSE_ERR, operation: operation)
        }
    }
}
