import CNetlink
import Glibc
import NetpermIO

/// The socket for requests (dumps and route lookups), one at a time, each answer matched by its sequence
/// number. Answers are read straight from the socket into one buffer: libnl's reader peeks at every datagram
/// first, a second system call each, and allocates a message per request where one buffer does.
final class QuerySocket {
    let socket: OpaquePointer
    /// One datagram at a time. The kernel fills a dump's datagrams up to 32 KiB (more for a link with many
    /// virtual functions); a bigger one grows the buffer and the request is made again.
    private var buffer = [UInt8](repeating: 0, count: 65536)

    init(_ socket: OpaquePointer) {
        self.socket = socket
    }

    /// What the handler makes of one message of the answer.
    enum Step {
        case more
        case done
    }

    /// Sends `type` with `body` (the fixed header, then attributes built by `attributes`) and passes each
    /// message of the answer to `handle` until it says done, the dump ends (NLMSG_DONE) or the kernel answers
    /// with an error (thrown, its errno in `code` as a negative number).
    func request(type: Int32, flags: Int32 = 0, body: UnsafeRawBufferPointer,
                 attributes: (OpaquePointer) -> Int32 = { _ in 0 },
                 handle: (UnsafeMutablePointer<nlmsghdr>) -> Step) throws(NetlinkError) {
        guard let msg = nlmsg_alloc_size(256) else {
            throw NetlinkError(code: -NLE_NOMEM, operation: "allocating a request")
        }
        defer { nlmsg_free(msg) }
        guard nlmsg_put(msg, UInt32(NL_AUTO_PORT), UInt32(bitPattern: NL_AUTO_SEQ), type, 0, flags) != nil,
              nlmsg_append(msg, UnsafeMutableRawPointer(mutating: body.baseAddress), body.count,
                           Int32(NLMSG_ALIGNTO)) >= 0,
              attributes(msg) >= 0 else {
            throw NetlinkError(code: -NLE_NOMEM, operation: "building a request")
        }
        let sent = nl_send_auto(socket, msg)
        guard sent >= 0 else { throw NetlinkError(code: sent, operation: "sending a request") }
        let sequence = nlmsg_hdr(msg).pointee.nlmsg_seq
        while true {
            let n = try receive("reading an answer")
            let step = try buffer.withUnsafeMutableBytes { b in
                Result { () throws(NetlinkError) -> Step in try Self.walk(b.baseAddress!, count: n, sequence: sequence, handle) }
            }.get()
            if case .done = step { return }
        }
    }

    /// Sends `count` requests in one datagram (the kernel handles each message of it in turn) and passes each
    /// request's one answer, a reply or an error message, to `handle` with the request's index. For requests
    /// answered by a single message (route lookups); `build` writes request `i`'s fixed header and attributes.
    func exchange(count: Int, type: Int32, build: (Int, OpaquePointer) -> Int32,
                  handle: (Int, UnsafeMutablePointer<nlmsghdr>) -> Void) throws(NetlinkError) {
        guard count > 0 else { return }
        var datagram: [UInt8] = []
        var index: [UInt32: Int] = [:]
        for i in 0..<count {
            guard let msg = nlmsg_alloc_size(256) else {
                throw NetlinkError(code: -NLE_NOMEM, operation: "allocating a request")
            }
            defer { nlmsg_free(msg) }
            let sequence = nl_socket_use_seq(socket)
            guard nlmsg_put(msg, UInt32(NL_AUTO_PORT), sequence, type, 0, NLM_F_REQUEST) != nil,
                  build(i, msg) >= 0 else {
                throw NetlinkError(code: -NLE_NOMEM, operation: "building a request")
            }
            let h = nlmsg_hdr(msg)!
            let length = Int(h.pointee.nlmsg_len)
            datagram.append(contentsOf: UnsafeRawBufferPointer(start: h, count: length))
            datagram.append(contentsOf: repeatElement(0, count: (4 - length % 4) % 4))
            index[sequence] = i
        }
        let fd = nl_socket_get_fd(socket)
        do throws(Errno) {
            _ = try datagram.withUnsafeBytes { b in
                Result { () throws(Errno) -> Int in try sys { send(fd, b.baseAddress, b.count, 0) } }
            }.get()
        } catch {
            throw NetlinkError(code: -NLE_FAILURE, operation: "sending requests (\(error))")
        }
        var answered = 0
        while answered < count {
            let n = try receive("reading answers")
            buffer.withUnsafeMutableBytes { b in
                var remaining = Int32(n)
                var header: UnsafeMutablePointer<nlmsghdr>? = b.baseAddress!.assumingMemoryBound(to: nlmsghdr.self)
                while let h = header, nlmsg_ok(h, remaining) != 0 {
                    // A late answer to an earlier request is skipped.
                    if let i = index.removeValue(forKey: h.pointee.nlmsg_seq) {
                        handle(i, h)
                        answered += 1
                    }
                    header = nlmsg_next(h, &remaining)
                }
            }
        }
    }

    /// One datagram into `buffer`, blocking; its length. One longer than the buffer is lost (the buffer grows for
    /// the next), and so is the exchange.
    private func receive(_ operation: String) throws(NetlinkError) -> Int {
        let fd = nl_socket_get_fd(socket)
        let n: Int
        do throws(Errno) {
            n = try buffer.withUnsafeMutableBytes { b in
                Result { () throws(Errno) -> Int in try sys { recv(fd, b.baseAddress, b.count, Int32(MSG_TRUNC)) } }
            }.get()
        } catch {
            throw NetlinkError(code: -NLE_FAILURE, operation: "\(operation) (\(error))")
        }
        guard n <= buffer.count else {
            buffer = [UInt8](repeating: 0, count: n)
            throw NetlinkError(code: -NLE_MSG_TRUNC, operation: "\(operation) (\(n) bytes, buffer grown)")
        }
        return n
    }

    /// The messages of one datagram that answer `sequence` (a late answer to an earlier request is skipped).
    private static func walk(_ start: UnsafeMutableRawPointer, count: Int, sequence: UInt32,
                             _ handle: (UnsafeMutablePointer<nlmsghdr>) -> Step) throws(NetlinkError) -> Step {
        var remaining = Int32(count)
        var header: UnsafeMutablePointer<nlmsghdr>? = start.assumingMemoryBound(to: nlmsghdr.self)
        while let h = header, nlmsg_ok(h, remaining) != 0 {
            if h.pointee.nlmsg_seq == sequence {
                switch Int32(h.pointee.nlmsg_type) {
                case NLMSG_ERROR:
                    let e = nlmsg_data(h).assumingMemoryBound(to: nlmsgerr.self).pointee.error
                    if e != 0 { throw NetlinkError(code: e, operation: "the kernel's answer", errno: -e) }
                    return .done
                case NLMSG_DONE:
                    return .done
                default:
                    if Int32(h.pointee.nlmsg_flags) & NLM_F_DUMP_INTR != 0 {
                        throw NetlinkError(code: -NLE_DUMP_INTR, operation: "a dump (changed while read)")
                    }
                    if case .done = handle(h) { return .done }
                }
            }
            header = nlmsg_next(h, &remaining)
        }
        return .more
    }
}
