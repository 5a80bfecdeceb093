// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc

/// The datagrams queued on a netlink event socket, read without blocking into one buffer that grows to fit. Every
/// event socket (rtnetlink, nl80211, nftables notifications, NFLOG) reads this way, and each must notice when
/// messages were lost.
public struct EventDatagrams {
    public enum Loss {
        /// The kernel dropped messages (ENOBUFS): the socket's buffer overran.
        case overrun(Errno)
        /// A datagram was longer than the buffer (now grown to fit the next one): its end was lost.
        case cut(bytes: Int)
    }

    private var buffer = [UInt8](repeating: 0, count: 65536)

    public init() {}

    /// Reads every datagram queued, or `limit` of them; `datagram` gets each one's bytes, `lost` each loss. Throws
    /// the first other error, after which nothing more is read. True when it stopped at `limit` (more may be queued).
    @discardableResult
    public mutating func drain(_ fd: Int32, limit: Int = .max, lost: (Loss) -> Void,
                               datagram: (UnsafeMutableRawBufferPointer) -> Void) throws(Errno) -> Bool {
        var read = 0
        while true {
            guard read < limit else { return true }
            let n: Int?
            do throws(Errno) {
                n = try buffer.withUnsafeMutableBytes { b in
                    Result { () throws(Errno) -> Int? in
                        try sysNonBlocking { recv(fd, b.baseAddress, b.count, Int32(MSG_TRUNC) | Int32(MSG_DONTWAIT)) }
                    }
                }.get()
            } catch where error.code == ENOBUFS {
                lost(.overrun(error))
                continue
            }
            guard let n else { return false }
            read += 1
            guard n <= buffer.count else {
                buffer = [UInt8](repeating: 0, count: n)
                lost(.cut(bytes: n))
                continue
            }
            buffer.withUnsafeMutableBytes { b in datagram(UnsafeMutableRawBufferPointer(rebasing: b[..<n])) }
        }
    }
}
