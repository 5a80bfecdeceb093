// SPDX-License-Identifier: LGPL-2.1-or-later
import CNftables
import Glibc
import NetpermIO

/// Whether a table exists, asked over one netfilter netlink request (NFT_MSG_GETTABLE): what a daemon in Mode=off
/// asks at start-up before loading libnftables to remove a table a killed daemon left, which is nearly never there.
public enum NftablesTable {
    /// nil when the kernel would not say (no CAP_NET_ADMIN: EPERM); throws when the socket itself fails. On
    /// `socket` when given (kept by the caller): closing a netfilter socket after a commit that removed anything
    /// waits for the kernel's RCU grace period (4-40 ms), which a caller on its event loop must not.
    public static func exists(family: UInt8 = UInt8(NFPROTO_INET), name: String,
                              on socket: NetlinkSocket? = nil) throws(Errno) -> Bool? {
        switch try NftablesRequest.ask(NFT_MSG_GETTABLE.rawValue, family: family,
                                       attributes: [(UInt16(NFTA_TABLE_NAME.rawValue), Array(name.utf8) + [0])],
                                       on: socket) {
        case .success: return true
        case let .failure(e): return e.code == ENOENT ? false : nil
        }
    }

    /// Deletes the tables `names` (those that exist) in one nf_tables transaction (NFT_MSG_DELTABLE in a batch):
    /// removing the rules needs no libnftables, so a system without it (a Recommends) still has them removed.
    /// Returns the tables deleted.
    public static func delete(_ names: [String], family: UInt8 = UInt8(NFPROTO_INET)) throws(Errno) -> [String] {
        var present: [String] = []
        for name in names where try exists(family: family, name: name) ?? true { present.append(name) }
        guard !present.isEmpty else { return [] }
        var messages = [NftablesRequest.batchMarker(np_nfnl_msg_batch_begin)]
        for name in present {
            var r = NetlinkRequest(type: UInt16(NFNL_SUBSYS_NFTABLES) << 8 | UInt16(NFT_MSG_DELTABLE.rawValue),
                                   flags: Netlink.flagAck)
            r.append(header: nfgenmsg(nfgen_family: family, version: UInt8(NFNETLINK_V0), res_id: 0))
            r.attribute(UInt16(NFTA_TABLE_NAME.rawValue), string: name)
            messages.append(r)
        }
        messages.append(NftablesRequest.batchMarker(np_nfnl_msg_batch_end))
        let socket = try NetlinkSocket(protocol: NETLINK_NETFILTER)
        var refused: Int32?
        do throws(NetlinkFailure) {
            try socket.exchange(messages, unanswered: [0, messages.count - 1], timeoutMilliseconds: 1000) { _, m in
                let e = m.errorCode ?? EPROTO
                if e != 0, refused == nil { refused = e }
            }
        } catch {
            switch error {
            case let .kernel(e), let .socket(e): throw e
            case .interrupted: throw .interrupted
            case .truncated: throw Errno(EMSGSIZE)
            case .malformed: throw Errno(EPROTO)
            }
        }
        if let refused { throw Errno(refused) }
        return present
    }
}
