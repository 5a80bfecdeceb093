// SPDX-License-Identifier: LGPL-2.1-or-later
import CNftables
import Glibc
import NetpermIO

/// Whether a table exists, asked over one netfilter netlink request (NFT_MSG_GETTABLE): what a daemon in Mode=off
/// asks at start-up before loading libnftables to remove a table a killed daemon left, which is nearly never there.
public enum NftablesTable {
    /// nil when the kernel would not say (no CAP_NET_ADMIN: EPERM); throws when the socket itself fails.
    public static func exists(family: UInt8 = UInt8(NFPROTO_INET), name: String) throws(Errno) -> Bool? {
        switch try NftablesRequest.ask(NFT_MSG_GETTABLE.rawValue, family: family,
                                       attributes: [(UInt16(NFTA_TABLE_NAME.rawValue), Array(name.utf8) + [0])]) {
        case .success: return true
        case let .failure(e): return e.code == ENOENT ? false : nil
        }
    }
}
