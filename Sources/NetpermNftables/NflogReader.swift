import CNftables
import Glibc
import NetpermIO

/// Reads the packets the rules log to one NFLOG group (`log group N prefix "..."`): how the daemon hears that the
/// kernel rejected a packet of an app whose kind is pending, whose socket it was (its owner's uid) and out of which
/// link. A raw netfilter netlink socket bound to the group (NFULNL_CFG_CMD_BIND), copying no packet bytes (the
/// prefix and two attributes are all that is read); closing it unbinds. Only one socket in a network namespace can
/// bind a group: another holding it makes `init` fail with EBUSY.
public final class NflogReader {
    /// What one logged packet says.
    public struct Packet: Equatable, Sendable {
        public var prefix: String
        /// The uid owning the packet's socket (NFULA_UID: the kernel adds it for a packet of a full socket with a
        /// file, from that file's credentials); nil without.
        public var uid: UInt32?
        /// The interface it was to leave by (NFULA_IFINDEX_OUTDEV).
        public var outIndex: Int32?
        public init(prefix: String, uid: UInt32? = nil, outIndex: Int32? = nil) {
            self.prefix = prefix; self.uid = uid; self.outIndex = outIndex
        }
    }

    private let fd: Int32
    private var source: IOSource?
    /// Each logged packet, in order.
    public var logged: (Packet) -> Void = { _ in }

    public init(loop: EventLoop, group: UInt16) throws(Errno) {
        // Blocking while the group is configured (the kernel acknowledges at once); read with MSG_DONTWAIT.
        fd = try sys { socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), NETLINK_NETFILTER) }
        do {
            var addr = sockaddr_nl()
            addr.nl_family = sa_family_t(AF_NETLINK)
            _ = try sys { withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_nl>.size))
                }
            } }
            try configure(group: group, attribute: UInt16(NFULA_CFG_CMD.rawValue), [UInt8(NFULNL_CFG_CMD_BIND.rawValue)])
            // copy_range 0 (big-endian u32), copy_mode NFULNL_COPY_META, padding: no packet bytes.
            try configure(group: group, attribute: UInt16(NFULA_CFG_MODE.rawValue), [0, 0, 0, 0, UInt8(NFULNL_COPY_META), 0])
            // Each message at once: the kernel otherwise holds up to 100 of them, or a second (measured: the prompt
            // came 1 s after the rejected connect).
            try configure(group: group, attribute: UInt16(NFULA_CFG_QTHRESH.rawValue), [0, 0, 0, 1])
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

    /// One NFULNL_MSG_CONFIG request with one attribute, and its acknowledgement.
    private func configure(group: UInt16, attribute: UInt16, _ payload: [UInt8]) throws(Errno) {
        var m: [UInt8] = []
        func u16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { m += $0 } }
        func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { m += $0 } }
        let attrLen = 4 + payload.count
        let total = 16 + 4 + ((attrLen + 3) & ~3)
        u32(UInt32(total))
        u16(UInt16(NFNL_SUBSYS_ULOG << 8) | UInt16(NFULNL_MSG_CONFIG.rawValue))
        u16(UInt16(NLM_F_REQUEST | NLM_F_ACK))
        u32(1)
        u32(0)
        // nfgenmsg: AF_UNSPEC, NFNETLINK_V0, the group (big-endian).
        m += [0, 0, UInt8(group >> 8), UInt8(group & 0xFF)]
        u16(UInt16(attrLen))
        u16(attribute)
        m += payload
        m += [UInt8](repeating: 0, count: total - m.count)
        _ = try sys { m.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) } }
        var reply = [UInt8](repeating: 0, count: 512)
        let n = try sys { reply.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) } }
        // NLMSG_ERROR: its error (0: acknowledged, else -errno) follows the header.
        guard n >= 20 else { throw Errno(EPROTO) }
        let type = reply.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 4, as: UInt16.self) }
        let error = reply.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 16, as: Int32.self) }
        guard type == UInt16(NLMSG_ERROR) else { throw Errno(EPROTO) }
        if error != 0 { throw Errno(-error) }
    }

    private func readAll() {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let result = buffer.withUnsafeMutableBytes { b in
                Result { () throws(Errno) -> Int? in try sysNonBlocking { recv(fd, b.baseAddress, b.count, Int32(MSG_DONTWAIT)) } }
            }
            switch result {
            case let .success(n?) where n > 0:
                for p in buffer.withUnsafeBytes({ Self.packets(in: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }) {
                    logged(p)
                }
            case let .failure(e) where e.code == ENOBUFS:
                // Messages lost: the rules log again a second later while the app keeps trying.
                continue
            case .success, .failure:
                return
            }
        }
    }

    /// Each NFULNL_MSG_PACKET with an NFULA_PREFIX in a buffer of netlink messages: the prefix (without its NUL),
    /// and NFULA_UID and NFULA_IFINDEX_OUTDEV when present (big-endian u32s).
    public static func packets(in b: UnsafeRawBufferPointer) -> [Packet] {
        var out: [Packet] = []
        var off = 0
        let packet = UInt16(NFNL_SUBSYS_ULOG << 8) | UInt16(NFULNL_MSG_PACKET.rawValue)
        while off + 16 <= b.count {
            let len = Int(b.loadUnaligned(fromByteOffset: off, as: UInt32.self))
            let type = b.loadUnaligned(fromByteOffset: off + 4, as: UInt16.self)
            guard len >= 16, off + len <= b.count else { break }
            let msg = UnsafeRawBufferPointer(rebasing: b[(off + 16)..<(off + len)])
            off += (len + 3) & ~3
            guard type == packet else { continue }
            var a = 4
            var packet: Packet?
            var uid: UInt32?, outIndex: Int32?
            while a + 4 <= msg.count {
                let alen = Int(msg.loadUnaligned(fromByteOffset: a, as: UInt16.self))
                let atype = msg.loadUnaligned(fromByteOffset: a + 2, as: UInt16.self) & 0x3FFF
                guard alen >= 4, a + alen <= msg.count else { break }
                func u32() -> UInt32? { alen >= 8 ? UInt32(bigEndian: msg.loadUnaligned(fromByteOffset: a + 4, as: UInt32.self)) : nil }
                switch atype {
                case UInt16(NFULA_PREFIX.rawValue):
                    packet = Packet(prefix: String(decoding: msg[(a + 4)..<(a + alen)].prefix { $0 != 0 }, as: UTF8.self))
                case UInt16(NFULA_UID.rawValue): uid = u32()
                case UInt16(NFULA_IFINDEX_OUTDEV.rawValue): outIndex = u32().map { Int32(bitPattern: $0) }
                default: break
                }
                a += (alen + 3) & ~3
            }
            if var packet {
                packet.uid = uid
                packet.outIndex = outIndex
                out.append(packet)
            }
        }
        return out
    }
}
