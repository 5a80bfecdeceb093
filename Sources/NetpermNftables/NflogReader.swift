import CNftables
import Glibc
import NetpermIO

/// Reads the prefixes of the packets the rules log to one NFLOG group (`log group N prefix "..."`): how the daemon
/// hears that the kernel rejected a packet of an app whose kind is pending. A raw netfilter netlink socket bound to
/// the group (NFULNL_CFG_CMD_BIND), copying no packet bytes (the prefix is all that is read); closing it unbinds.
/// Only one socket in a network namespace can bind a group: another holding it makes `init` fail with EBUSY.
public final class NflogReader {
    private let socket: NetlinkSocket
    private var source: IOSource?
    private var datagrams = EventDatagrams()
    /// Each logged packet's prefix, in order.
    public var logged: (String) -> Void = { _ in }

    public init(loop: EventLoop, group: UInt16) throws(Errno) {
        // Blocking while the group is configured (the kernel acknowledges at once); read with MSG_DONTWAIT.
        socket = try NetlinkSocket(protocol: NETLINK_NETFILTER)
        try configure(group: group, attribute: UInt16(NFULA_CFG_CMD.rawValue), [UInt8(NFULNL_CFG_CMD_BIND.rawValue)])
        // copy_range 0 (big-endian u32), copy_mode NFULNL_COPY_META, padding: no packet bytes.
        var mode = nfulnl_msg_config_mode()
        mode.copy_range = UInt32(0).bigEndian
        mode.copy_mode = UInt8(NFULNL_COPY_META)
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
        try? datagrams.drain(socket.fd, lost: { _ in }) { b in
            for p in Self.prefixes(in: UnsafeRawBufferPointer(b)) { logged(p) }
        }
    }

    /// The NFULA_PREFIX of each NFULNL_MSG_PACKET in a buffer of netlink messages (without its NUL).
    public static func prefixes(in b: UnsafeRawBufferPointer) -> [String] {
        let packet = UInt16(NFNL_SUBSYS_ULOG << 8) | UInt16(NFULNL_MSG_PACKET.rawValue)
        return NetlinkMessages(b).compactMap { m in
            guard m.type == packet else { return nil }
            return m.attributes(after: MemoryLayout<nfgenmsg>.size).first(UInt16(NFULA_PREFIX.rawValue)).map(Netlink.string)
        }
    }
}
