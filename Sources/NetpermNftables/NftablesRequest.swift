import CNftables
import Glibc
import NetpermIO

/// One request to nf_tables over a netfilter netlink socket of its own, answered at once: whether a table exists
/// (`NFT_MSG_GETTABLE`), the ruleset's generation (`NFT_MSG_GETGEN`). Not libnftables: these are asked where loading
/// it would cost more than the question (Mode=off) or around its own transactions.
public enum NftablesRequest {
    /// The messages the kernel answered before its ACK (their `NFT_MSG_*` type and what follows the nlmsghdr), or
    /// the error it answered with; with `dump`, every message of the dump, to its end.
    static func ask(_ type: UInt32, family: UInt8, attributes: [(type: UInt16, value: [UInt8])] = [], dump: Bool = false)
    throws(Errno) -> Result<[(type: UInt32, message: [UInt8])], Errno> {
        let fd = try sys { socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), NETLINK_NETFILTER) }
        defer { FD.close(fd) }
        var msg: [UInt8] = []
        func u16(_ v: UInt16) { withUnsafeBytes(of: v) { msg += $0 } }
        func u32(_ v: UInt32) { withUnsafeBytes(of: v) { msg += $0 } }
        // nlmsghdr, nfgenmsg, then each attribute padded to 4 bytes.
        let total = 16 + 4 + attributes.reduce(0) { $0 + ((4 + $1.value.count + 3) & ~3) }
        u32(UInt32(total))
        u16(UInt16(NFNL_SUBSYS_NFTABLES) << 8 | UInt16(type))
        u16(UInt16(NLM_F_REQUEST | (dump ? NLM_F_DUMP : NLM_F_ACK)))
        u32(1)
        u32(0)
        msg += [family, UInt8(NFNETLINK_V0), 0, 0]
        for a in attributes {
            u16(UInt16(4 + a.value.count))
            u16(a.type)
            msg += a.value
            while msg.count % 4 != 0 { msg.append(0) }
        }
        _ = try msg.withUnsafeBytes { b in
            Result { () throws(Errno) -> Int in try sys { send(fd, b.baseAddress, b.count, 0) } }
        }.get()
        var answers: [(type: UInt32, message: [UInt8])] = []
        // A dump's messages are up to 32 KiB each.
        var buffer = [UInt8](repeating: 0, count: dump ? 65536 : 8192)
        while true {
            // The kernel answers at once; the wait is bounded all the same.
            guard try FD.wait(fd, for: Int16(POLLIN), timeoutMilliseconds: 1000) != 0 else { throw Errno(ETIMEDOUT) }
            let n = try buffer.withUnsafeMutableBytes { b in
                Result { () throws(Errno) -> Int in try sys { recv(fd, b.baseAddress, b.count, 0) } }
            }.get()
            var off = 0
            while off + 16 <= n {
                let len = Int(buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: off, as: UInt32.self) })
                let type = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: off + 4, as: UInt16.self) }
                guard len >= 16, off + len <= n else { return .failure(Errno(EPROTO)) }
                if type == UInt16(NLMSG_DONE) { return .success(answers) }
                if type == UInt16(NLMSG_ERROR) {
                    guard off + 20 <= n else { return .failure(Errno(EPROTO)) }
                    let error = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: off + 16, as: Int32.self) }
                    return error == 0 ? .success(answers) : .failure(Errno(-error))
                }
                answers.append((UInt32(type & 0xFF), Array(buffer[(off + 16)..<(off + len)])))
                off += (len + 3) & ~3
            }
        }
    }

    /// The ruleset's generation: every committed transaction, whoever made it, adds one.
    public static func generation() throws(Errno) -> UInt32 {
        let answers = try ask(NFT_MSG_GETGEN.rawValue, family: UInt8(AF_UNSPEC)).get()
        for a in answers where a.type == NFT_MSG_NEWGEN.rawValue {
            let id = a.message.withUnsafeBytes { attribute($0, UInt16(NFTA_GEN_ID.rawValue)) }
            if let id { return id }
        }
        throw Errno(EPROTO)
    }

    /// The payload of the first attribute of `type` in a message (after its nlmsghdr: the 4-byte nfgenmsg, then
    /// attributes), as a big-endian u32.
    static func attribute(_ msg: UnsafeRawBufferPointer, _ type: UInt16) -> UInt32? {
        attributeBytes(msg, type).flatMap { $0.count >= 4 ? UInt32(bigEndian: $0.loadUnaligned(as: UInt32.self)) : nil }
    }

    /// The payload of the first attribute of `type` in a message (after its nlmsghdr).
    static func attributeBytes(_ msg: UnsafeRawBufferPointer, _ type: UInt16) -> UnsafeRawBufferPointer? {
        var off = 4
        while off + 4 <= msg.count {
            let len = Int(msg.loadUnaligned(fromByteOffset: off, as: UInt16.self))
            let t = msg.loadUnaligned(fromByteOffset: off + 2, as: UInt16.self) & 0x3FFF
            guard len >= 4, off + len <= msg.count else { return nil }
            if t == type { return UnsafeRawBufferPointer(rebasing: msg[(off + 4)..<(off + len)]) }
            off += (len + 3) & ~3
        }
        return nil
    }
}
