// SPDX-License-Identifier: LGPL-2.1-or-later
import CNftables
import Glibc
import NetpermCore
import NetpermIO

/// Conntrack's own events (ctnetlink's `NFNLGRP_CONNTRACK_NEW` and `DESTROY` groups) on a raw netfilter netlink
/// socket: how the privacy report learns of each new connection as the kernel confirms it, never by polling
/// (docs/PRIVACY.md). Only tagged connections (their mark is a ConnectionTags tag) are kept; the rest of the
/// namespace's connections are dropped here, before the engine sees them. Needs CAP_NET_ADMIN.
public final class ConntrackEvents {
    private let socket: NetlinkSocket
    private let loop: EventLoop
    private var source: IOSource?
    private var pause: TimerSource?
    private var datagrams = EventDatagrams()
    /// After a pass, the socket is not read for this long: a flood's events wait in its buffer and the next pass
    /// takes them all as one input (10,000 connections a second, one a wake-up, cost the loop 20 µs each). 10 ms
    /// instead was measured no cheaper per connection (figure 25): the cost is per event, not per input.
    static let pauseMicroseconds: UInt64 = 2000
    /// The most events one pass takes: what the loop is held for at once is bounded (about 1 ms of the engine's work)
    /// however long the loop was away and however much waits; the rest is read on the loop's next turn, after the
    /// others waiting (a client's request).
    static let passLimit = 256
    /// The connections of one pass, and how many events the kernel dropped (its buffer overran) since the last.
    public var seen: ([ReportSighting], Int) -> Void = { _, _ in }

    public init(loop: EventLoop) throws(Errno) {
        let groups = UInt32(1) << (UInt32(NFNLGRP_CONNTRACK_NEW.rawValue) - 1)
            | UInt32(1) << (UInt32(NFNLGRP_CONNTRACK_DESTROY.rawValue) - 1)
        socket = try NetlinkSocket(protocol: NETLINK_NETFILTER, groups: groups, nonBlocking: true)
        self.loop = loop
        // A burst of 10,000 connections a second is 1-2 MB of events: room for a second of them.
        var size: Int32 = 4 << 20
        _ = try? sys { setsockopt(socket.fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, socklen_t(MemoryLayout<Int32>.size)) }
        source = try loop.addIO(fd: socket.fd, events: IOEvents.readable) { [unowned self] _ in self.readAll() }
    }

    deinit {
        source?.cancel()
        pause?.cancel()
    }

    private func readAll() {
        var found: [ReportSighting] = []
        var lost = 0
        let more = (try? datagrams.drain(socket.fd, limit: Self.passLimit, lost: { _ in lost += 1 }) { b in
            found += Self.sightings(in: UnsafeRawBufferPointer(b))
        }) ?? false
        if !found.isEmpty || lost > 0 { seen(found, lost) }
        // A backlog is taken a pass at a time, with no pause between: the loop serves the others in between.
        if more { return }
        // Without a timer (none to be had), the socket is read as it becomes readable.
        guard let timer = try? loop.addTimer(afterMicroseconds: Self.pauseMicroseconds, { [unowned self] in
            self.pause = nil
            self.source?.setEvents(IOEvents.readable)
        }) else { return }
        pause = timer
        source?.setEvents(0)
    }

    /// Each tagged connection's NEW or DESTROY message in a buffer of netlink messages: the original direction's
    /// destination, port and protocol, its labels' class of link, and (DESTROY) both ways' bytes when counted.
    public static func sightings(in b: UnsafeRawBufferPointer) -> [ReportSighting] {
        let new = UInt16(NFNL_SUBSYS_CTNETLINK << 8) | UInt16(IPCTNL_MSG_CT_NEW.rawValue)
        let delete = UInt16(NFNL_SUBSYS_CTNETLINK << 8) | UInt16(IPCTNL_MSG_CT_DELETE.rawValue)
        return NetlinkMessages(b).compactMap { m in
            guard m.type == new || m.type == delete else { return nil }
            let a = m.attributes(after: MemoryLayout<nfgenmsg>.size)
            let labels = a.first(UInt16(CTA_LABELS.rawValue)).map(Array.init) ?? []
            // A user's unit's connection (its cgroup id in its labels) is kept tagged or not.
            let unit = ReportLabels.unit(labels)
            let mark = a.first(UInt16(CTA_MARK.rawValue)).flatMap(Netlink.bigEndianU32) ?? 0
            guard ReportLabels.isTag(mark) || unit != nil,
                  let tuple = a.first(UInt16(CTA_TUPLE_ORIG.rawValue)).flatMap(Self.destination) else { return nil }
            let link = ReportLabels.link(labels)
            if m.type == new {
                return .opened(tag: mark, address: tuple.address, port: tuple.port, proto: tuple.proto, link: link, unit: unit)
            }
            let bytes = [CTA_COUNTERS_ORIG, CTA_COUNTERS_REPLY].reduce(UInt64(0)) { sum, type in
                sum &+ (a.first(UInt16(type.rawValue)).flatMap(Self.bytes) ?? 0)
            }
            return .closed(tag: mark, address: tuple.address, link: link, bytes: bytes, unit: unit)
        }
    }

    /// CTA_TUPLE_ORIG's destination: CTA_TUPLE_IP's CTA_IP_V4_DST or V6_DST, CTA_TUPLE_PROTO's number and port.
    static func destination(_ tuple: UnsafeRawBufferPointer) -> (address: String, port: UInt16, proto: UInt8)? {
        let t = NetlinkAttributes(tuple)
        guard let ip = t.first(UInt16(CTA_TUPLE_IP.rawValue)), let proto = t.first(UInt16(CTA_TUPLE_PROTO.rawValue)) else {
            return nil
        }
        let ips = NetlinkAttributes(ip)
        guard let raw = ips.first(UInt16(CTA_IP_V4_DST.rawValue)) ?? ips.first(UInt16(CTA_IP_V6_DST.rawValue)),
              let address = AddressText.text(raw) else { return nil }
        let p = NetlinkAttributes(proto)
        guard let number = p.first(UInt16(CTA_PROTO_NUM.rawValue)), number.count >= 1 else { return nil }
        let port = p.first(UInt16(CTA_PROTO_DST_PORT.rawValue)).flatMap { $0.count >= 2 ? UInt16($0[0]) << 8 | UInt16($0[1]) : nil }
        return (address, port ?? 0, number[0])
    }

    /// CTA_COUNTERS_*'s CTA_COUNTERS_BYTES (big-endian u64).
    static func bytes(_ counters: UnsafeRawBufferPointer) -> UInt64? {
        guard let b = NetlinkAttributes(counters).first(UInt16(CTA_COUNTERS_BYTES.rawValue)), b.count >= 8 else { return nil }
        return UInt64(bigEndian: b.loadUnaligned(as: UInt64.self))
    }
}
