import CNftables
import Glibc
import NetpermIO

/// Whether a table exists, asked over one netfilter netlink request (NFT_MSG_GETTABLE): what a daemon in Mode=off
/// asks at start-up before loading libnftables to remove a table a killed daemon left, which is nearly never there.
public enum NftablesTable {
    /// nil when the kernel would not say (no CAP_NET_ADMIN: EPERM); throws when the socket itself fails.
    public static func exists(family: UInt8 = UInt8(NFPROTO_INET), name: String) throws(Errno) -> Bool? {
        let fd = try sys { socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), NETLINK_NETFILTER) }
        defer { FD.close(fd) }
        // nlmsghdr, nfgenmsg, then NFTA_TABLE_NAME with its NUL, padded to 4 bytes.
        let nameBytes = Array(name.utf8) + [0]
        let attrLen = 4 + nameBytes.count
        var msg: [UInt8] = []
        func u16(_ v: UInt16) { withUnsafeBytes(of: v) { msg += $0 } }
        func u32(_ v: UInt32) { withUnsafeBytes(of: v) { msg += $0 } }
        let total = 16 + 4 + ((attrLen + 3) & ~3)
        u32(UInt32(total))
        u16(UInt16(NFNL_SUBSYS_NFTABLES) << 8 | UInt16(NFT_MSG_GETTABLE.rawValue))
        u16(UInt16(NLM_F_REQUEST | NLM_F_ACK))
        u32(1)
        u32(0)
        msg += [family, UInt8(NFNETLINK_V0), 0, 0]
        u16(UInt16(attrLen))
        u16(UInt16(NFTA_TABLE_NAME.rawValue))
        msg += nameBytes
        while msg.count < total { msg.append(0) }
        _ = try msg.withUnsafeBytes { b in
            Result { () throws(Errno) -> Int in try sys { send(fd, b.baseAddress, b.count, 0) } }
        }.get()
        var buffer = [UInt8](repeating: 0, count: 8192)
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
                guard len >= 16 else { return nil }
                if type == UInt16(NLMSG_ERROR), off + 20 <= n {
                    let error = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: off + 16, as: Int32.self) }
                    if error == 0 { return true }           // the ACK after the table
                    if error == -ENOENT { return false }
                    return nil
                }
                if type & 0xFF == UInt16(NFT_MSG_NEWTABLE.rawValue) { return true }
                off += (len + 3) & ~3
            }
        }
    }
}
