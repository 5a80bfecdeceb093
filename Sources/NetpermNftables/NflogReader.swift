// SPDX-License-Identifier: LGPL-2.1-or-later
import CNftables
import Glibc
import NetpermIO

/// Reads the packets the rules log to one NFLOG group (`log group N prefix "..."`): how the daemon hears that the
/// kernel rejected a packet of an app whose kind is pending, whose socket it was (its owner's uid) and out of which
/// link, to where. A raw netfilter netlink socket bound to the group (NFULNL_CFG_CMD_BIND), copying the packet's
/// first bytes (its IP header and ports: where it was going, for the prompt); closing it unbinds. Only one socket in a network namespace can
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
        /// Where it was going: "203.0.113.5:443", "[2001:db8::1]:53", an address alone for other protocols.
        public var destination: String?
        /// A TCP SYN-ACK: a local server's answer to a connection from elsewhere, not the app reaching out.
        public var answersIncoming = false
        public init(prefix: String, uid: UInt32? = nil, outIndex: Int32? = nil, destination: String? = nil,
                    answersIncoming: Bool = false) {
            self.prefix = prefix; self.uid = uid; self.outIndex = outIndex; self.destination = destination
            self.answersIncoming = answersIncoming
        }

        /// With what its copied first bytes say (NFULA_PAYLOAD), read once.
        init(prefix: String, uid: UInt32?, outIndex: Int32?, payload: [UInt8]?) {
            self.init(prefix: prefix, uid: uid, outIndex: outIndex, destination: payload.flatMap(NflogReader.destination),
                      answersIncoming: payload.map(NflogReader.isSynAck) ?? false)
        }
    }

    private let socket: NetlinkSocket
    private var source: IOSource?
    private var datagrams = EventDatagrams()
    /// Each logged packet, in order.
    public var logged: (Packet) -> Void = { _ in }
    /// Set: each datagram's bytes go here instead, for a reader that parses them itself (the report's answers).
    public var datagram: ((UnsafeRawBufferPointer) -> Void)?

    /// Called when the kernel dropped messages (the socket's buffer was full: `ENOBUFS`).
    public var overrun: () -> Void = {}

    /// `copy`: the packet bytes copied. `receiveBuffer`: the socket's buffer in bytes (SO_RCVBUFFORCE, past
    /// rmem_max: the socket needs CAP_NET_ADMIN anyway), for a group whose messages come in bursts.
    public init(loop: EventLoop, group: UInt16, copy: Int = NflogReader.copied, receiveBuffer: Int32? = nil) throws(Errno) {
        // Blocking while the group is configured (the kernel acknowledges at once); read with MSG_DONTWAIT.
        socket = try NetlinkSocket(protocol: NETLINK_NETFILTER)
        if var size = receiveBuffer {
            _ = try? sys { setsockopt(socket.fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, socklen_t(MemoryLayout<Int32>.size)) }
        }
        try configure(group: group, attribute: UInt16(NFULA_CFG_CMD.rawValue), [UInt8(NFULNL_CFG_CMD_BIND.rawValue)])
        // copy_range (big-endian u32), copy_mode NFULNL_COPY_PACKET: an IPv6 header and the ports, no payload.
        var mode = nfulnl_msg_config_mode()
        mode.copy_range = UInt32(copy).bigEndian
        mode.copy_mode = UInt8(NFULNL_COPY_PACKET)
        try withUnsafeBytes(of: mode) { b throws(Errno) in try configure(group: group, attribute: UInt16(NFULA_CFG_MODE.rawValue), Array(b)) }
        // Each message at once: the kernel otherwise holds up to 100 of them, or a second (measured: the prompt
        // came 1 s after the rejected connect).
        try configure(group: group, attribute: UInt16(NFULA_CFG_QTHRESH.rawValue), withUnsafeBytes(of: UInt32(1).bigEndian) { Array($0) })
        source = try loop.addIO(fd: socket.fd, events: IOEvents.readable) { [unowned self] _ in self.readAll() }
    }

    deinit { source?.cancel() }

    /// One NFULNL_MSG_CONFIG request with one attribute, and its acknowledgement (of this request: its sequence and
    /// this socket's port).
    private func configure(group: UInt16, attribute: UInt16, _ payload: [UInt8]) throws(Errno) {
        var request = NetlinkRequest(type: UInt16(NFNL_SUBSYS_ULOG << 8) | UInt16(NFULNL_MSG_CONFIG.rawValue),
                                     flags: Netlink.flagAck)
        // nfgenmsg: AF_UNSPEC, NFNETLINK_V0, the group (big-endian).
        request.append(header: nfgenmsg(nfgen_family: UInt8(AF_UNSPEC), version: UInt8(NFNETLINK_V0), res_id: group.bigEndian))
        request.attribute(attribute, bytes: payload)
        do throws(NetlinkFailure) {
            try socket.request(request, timeoutMilliseconds: 1000)
        } catch {
            switch error {
            case let .kernel(e), let .socket(e): throw e
            case .interrupted, .truncated, .malformed: throw Errno(EPROTO)
            }
        }
    }

    private func readAll() {
        // Messages lost: the rules log again a second later while the app keeps trying.
        try? datagrams.drain(socket.fd, lost: { [overrun] _ in overrun() }) { b in
            if let datagram { return datagram(UnsafeRawBufferPointer(b)) }
            for p in Self.packets(in: UnsafeRawBufferPointer(b)) { logged(p) }
        }
    }

    /// The packet bytes copied: an IPv6 header (40) and a TCP header up to its flags (14), or a UDP header's ports.
    public static let copied = 54

    /// Each NFULNL_MSG_PACKET with an NFULA_PREFIX in a buffer of netlink messages: the prefix (without its NUL),
    /// and NFULA_UID and NFULA_IFINDEX_OUTDEV when present (big-endian u32s), and the destination NFULA_PAYLOAD says.
    public static func packets(in b: UnsafeRawBufferPointer) -> [Packet] {
        let packet = UInt16(NFNL_SUBSYS_ULOG << 8) | UInt16(NFULNL_MSG_PACKET.rawValue)
        return NetlinkMessages(b).compactMap { m in
            guard m.type == packet else { return nil }
            let attributes = m.attributes(after: MemoryLayout<nfgenmsg>.size)
            guard let prefix = attributes.first(UInt16(NFULA_PREFIX.rawValue)).map(Netlink.string) else { return nil }
            return Packet(prefix: prefix, uid: attributes.first(UInt16(NFULA_UID.rawValue)).flatMap(Netlink.bigEndianU32),
                          outIndex: attributes.first(UInt16(NFULA_IFINDEX_OUTDEV.rawValue)).flatMap(Netlink.bigEndianU32)
                              .map { Int32(bitPattern: $0) },
                          payload: attributes.first(UInt16(NFULA_PAYLOAD.rawValue)).map(Array.init))
        }
    }

    /// An IP packet's first bytes as far as they go: its version's header, where its transport header starts, and
    /// its protocol. Nil for anything but IPv4 and IPv6, or too short.
    struct Headers {
        var bytes: [UInt8]
        var v6: Bool
        var proto: UInt8
        var transport: Int

        init?(_ b: [UInt8]) {
            guard let first = b.first else { return nil }
            switch first >> 4 {
            case 4:
                guard b.count >= 20, first & 0x0F >= 5 else { return nil }
                (v6, proto, transport) = (false, b[9], Int(first & 0x0F) * 4)
            case 6:
                guard b.count >= 40 else { return nil }
                (v6, proto, transport) = (true, b[6], 40)
            default:
                return nil
            }
            bytes = b
        }

        /// The byte at `offset` into the transport header, when it was copied.
        func transportByte(_ offset: Int) -> UInt8? { bytes.count > transport + offset ? bytes[transport + offset] : nil }
    }

    /// Whether an IP packet (its first bytes) is a TCP SYN-ACK.
    public static func isSynAck(_ b: [UInt8]) -> Bool {
        guard let h = Headers(b), h.proto == UInt8(IPPROTO_TCP), let flags = h.transportByte(13) else { return false }
        return flags & 0x12 == 0x12
    }

    /// Where an IP packet (its first bytes) was going: the destination address, and the port for TCP and UDP.
    /// Nil for anything else or too short.
    public static func destination(_ b: [UInt8]) -> String? {
        guard let h = Headers(b) else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let ok: Bool
        if h.v6 {
            var a = in6_addr()
            withUnsafeMutableBytes(of: &a) { $0.copyBytes(from: b[24..<40]) }
            ok = inet_ntop(AF_INET6, &a, &text, socklen_t(text.count)) != nil
        } else {
            var a = in_addr()
            withUnsafeMutableBytes(of: &a) { $0.copyBytes(from: b[16..<20]) }
            ok = inet_ntop(AF_INET, &a, &text, socklen_t(text.count)) != nil
        }
        guard ok else { return nil }
        let address = String(cString: text)
        guard h.proto == UInt8(IPPROTO_TCP) || h.proto == UInt8(IPPROTO_UDP), let high = h.transportByte(2),
              let low = h.transportByte(3) else { return address }
        return (h.v6 ? "[" + address + "]" : address) + ":" + String(UInt16(high) << 8 | UInt16(low))
    }
}
