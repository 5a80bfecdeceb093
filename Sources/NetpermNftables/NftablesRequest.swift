// SPDX-License-Identifier: LGPL-2.1-or-later
import CNftables
import Glibc
import NetpermIO

/// One request to nf_tables over a netfilter netlink socket, answered at once: whether a table exists
/// (`NFT_MSG_GETTABLE`), the ruleset's generation (`NFT_MSG_GETGEN`). Not libnftables: these are asked where loading
/// it would cost more than the question (Mode=off) or around its own transactions.
///
/// Each request opens a socket of its own unless given one to keep. Closing a netfilter socket that was bound is not
/// free: the kernel (`nft_rcv_nl_event`) takes the ruleset's commit lock and waits for the destruction of what the
/// last transactions replaced, which waits for an RCU grace period (4-40 ms here, 11 median), whoever committed. What
/// asks often on the daemon's loop keeps its socket (NftablesMonitor).
public enum NftablesRequest {
    /// The messages the kernel answered before its ACK (their `NFT_MSG_*` type and what follows the nlmsghdr), or
    /// the error it answered with; with `dump`, every message of the dump. Asked again, up to 3 times, when a dump's
    /// table changed while it was read or an answer did not fit the buffer (which has grown since). On `socket` when
    /// given (kept by the caller: answers are matched by sequence, so a late one to an earlier request is skipped).
    static func ask(_ type: UInt32, family: UInt8, attributes: [(type: UInt16, value: [UInt8])] = [],
                    dump: Bool = false, on socket: NetlinkSocket? = nil)
    throws(Errno) -> Result<[(type: UInt32, message: [UInt8])], Errno> {
        var tries = 0
        while true {
            tries += 1
            let on: NetlinkSocket
            if let socket { on = socket } else { on = try NetlinkSocket(protocol: NETLINK_NETFILTER) }
            let r = try askOnce(type, family: family, attributes: attributes, dump: dump, on: on)
            if case let .failure(e) = r, e == .interrupted || e.code == EMSGSIZE, tries < 3 { continue }
            return r
        }
    }

    private static func askOnce(_ type: UInt32, family: UInt8, attributes: [(type: UInt16, value: [UInt8])], dump: Bool,
                                on socket: NetlinkSocket)
    throws(Errno) -> Result<[(type: UInt32, message: [UInt8])], Errno> {
        var request = NetlinkRequest(type: UInt16(NFNL_SUBSYS_NFTABLES) << 8 | UInt16(type),
                                     flags: dump ? Netlink.flagDump : Netlink.flagAck)
        request.append(header: nfgenmsg(nfgen_family: family, version: UInt8(NFNETLINK_V0), res_id: 0))
        for a in attributes { request.attribute(a.type, bytes: a.value) }
        var answers: [(type: UInt32, message: [UInt8])] = []
        do throws(NetlinkFailure) {
            // The kernel answers at once; each wait is bounded all the same.
            try socket.request(request, timeoutMilliseconds: 1000) { m in
                answers.append((UInt32(m.type & 0xFF), Array(m.payload)))
                return .more
            }
        } catch {
            switch error {
            case let .kernel(e): return .failure(e)
            case let .socket(e): throw e
            case .interrupted: return .failure(.interrupted)
            case .truncated: return .failure(Errno(EMSGSIZE))
            case .malformed: return .failure(Errno(EPROTO))
            }
        }
        return .success(answers)
    }

    /// A batch's begin or end message: nf_tables changes only inside one, as one transaction.
    static func batchMarker(_ type: UInt16) -> NetlinkRequest {
        var r = NetlinkRequest(type: type, flags: 0)
        r.append(header: nfgenmsg(nfgen_family: UInt8(AF_UNSPEC), version: UInt8(NFNETLINK_V0),
                                  res_id: UInt16(NFNL_SUBSYS_NFTABLES).bigEndian))
        return r
    }

    /// The ruleset's generation: every committed transaction, whoever made it, adds one. Asked on `socket` when given.
    public static func generation(on socket: NetlinkSocket? = nil) throws(Errno) -> UInt32 {
        let answers = try ask(NFT_MSG_GETGEN.rawValue, family: UInt8(AF_UNSPEC), on: socket).get()
        for a in answers where a.type == NFT_MSG_NEWGEN.rawValue {
            let id = a.message.withUnsafeBytes { attribute($0, UInt16(NFTA_GEN_ID.rawValue)) }
            if let id { return id }
        }
        throw Errno(EPROTO)
    }

    /// The payload of the first attribute of `type` in a message (after its nlmsghdr: the 4-byte nfgenmsg, then
    /// attributes), as a big-endian u32.
    static func attribute(_ msg: UnsafeRawBufferPointer, _ type: UInt16) -> UInt32? {
        attributeBytes(msg, type).flatMap(Netlink.bigEndianU32)
    }

    /// The payload of the first attribute of `type` in a message (after its nlmsghdr).
    static func attributeBytes(_ msg: UnsafeRawBufferPointer, _ type: UInt16) -> UnsafeRawBufferPointer? {
        guard msg.count >= MemoryLayout<nfgenmsg>.size else { return nil }
        return NetlinkAttributes(UnsafeRawBufferPointer(rebasing: msg[MemoryLayout<nfgenmsg>.size...])).first(type)
    }
}
