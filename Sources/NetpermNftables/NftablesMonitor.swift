import CNftables
import Glibc
import NetpermIO

/// Tells when another process changes one table: the kernel's nftables notifications (NFNLGRP_NFTABLES), so
/// `nft flush ruleset` is seen as it happens, and an idle daemon never wakes up to look.
///
/// A transaction's notifications end with NFT_MSG_NEWGEN, which names the process that made it: any change to
/// the table (a deletion, an added rule or element) in a transaction of another process calls `changed`, once
/// per transaction. Messages lost to a
/// full receive buffer call it too: what they said is unknown.
public final class NftablesMonitor {
    private let fd: Int32
    private var source: IOSource?
    private let family: UInt8
    private let table: [UInt8]
    private let ownPID = UInt32(getpid())
    /// A change to the table was seen in the transaction whose messages are being read.
    private var touched = false
    public var changed: (_ byPID: UInt32?, _ byName: String?) -> Void = { _, _ in }

    public init(loop: EventLoop, family: UInt8 = UInt8(NFPROTO_INET), table: String) throws(Errno) {
        self.family = family
        self.table = Array(table.utf8)
        fd = try sys { socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
                                | Int32(SOCK_NONBLOCK.rawValue), NETLINK_NETFILTER) }
        var addr = sockaddr_nl()
        addr.nl_family = sa_family_t(AF_NETLINK)
        addr.nl_groups = 1 << (UInt32(NFNLGRP_NFTABLES.rawValue) - 1)
        do {
            _ = try sys { withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_nl>.size))
                }
            } }
            source = try loop.addIO(fd: fd, events: IOEvents.readable) { [unowned self] _ in self.readAll() }
        } catch {
            FD.close(fd)
            throw error
        }
    }

    deinit {
        source?.cancel()
        FD.close(fd)
    }

    private func readAll() {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let result = buffer.withUnsafeMutableBytes { b in
                Result { () throws(Errno) -> Int? in try sysNonBlocking { recv(fd, b.baseAddress, b.count, 0) } }
            }
            let n: Int?
            switch result {
            case let .success(r): n = r
            case let .failure(e) where e.code == ENOBUFS:
                touched = false
                changed(nil, nil)
                continue
            case .failure: return
            }
            guard let n, n > 0 else { return }
            buffer.withUnsafeBytes { parse(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
    }

    private func parse(_ b: UnsafeRawBufferPointer) {
        var off = 0
        let subsys = UInt16(NFNL_SUBSYS_NFTABLES) << 8
        while off + 16 <= b.count {
            let len = Int(b.loadUnaligned(fromByteOffset: off, as: UInt32.self))
            let type = b.loadUnaligned(fromByteOffset: off + 4, as: UInt16.self)
            guard len >= 16, off + len <= b.count else { return }
            let msg = UnsafeRawBufferPointer(rebasing: b[(off + 16)..<(off + len)])
            off += (len + 3) & ~3
            guard type & 0xFF00 == subsys, msg.count >= 4 else { continue }
            let kind = UInt32(type & 0xFF)
            if kind == NFT_MSG_NEWGEN.rawValue {
                guard touched else { continue }
                touched = false
                let pid = attribute(msg, UInt16(NFTA_GEN_PROC_PID.rawValue)).flatMap { a -> UInt32? in
                    a.count >= 4 ? UInt32(bigEndian: a.loadUnaligned(as: UInt32.self)) : nil
                }
                guard pid != ownPID else { continue }
                let name = attribute(msg, UInt16(NFTA_GEN_PROC_NAME.rawValue)).map {
                    String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
                }
                changed(pid, name)
            } else if kind != NFT_MSG_TRACE.rawValue, msg[0] == family,
                      let name = attribute(msg, 1), Array(name.prefix { $0 != 0 }) == table {
                // Attribute 1 is the table's name in every message that belongs to a table.
                touched = true
            }
        }
    }

    /// The payload of the first attribute of `type` after the 4-byte nfgenmsg.
    private func attribute(_ msg: UnsafeRawBufferPointer, _ type: UInt16) -> UnsafeRawBufferPointer? {
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
