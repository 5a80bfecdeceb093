// SPDX-License-Identifier: LGPL-2.1-or-later
import CNftables
import Glibc
import NetpermCore
import NetpermIO

/// Element changes (`ElementChanges`) sent to nf_tables as one nfnetlink batch of NEWSETELEM, DELSETELEM and
/// DELCHAIN messages through the netlink layer: one transaction, all or nothing, as libnftables would commit it,
/// without libnftables' reading of the whole table first (a one-element change with 13,000 chains cost 11-18 ms,
/// nearly all of it that read). Keys and values are laid out as nft lays them out for the map's type.
public enum NftablesElements {
    /// Where nft resolves a `cgroupsv2` path from (its own constant, whatever the hierarchy's mount point).
    static let cgroupRoot = "/sys/fs/cgroup/"
    /// A batch is one datagram: past this size, or this many elements (each under 80 bytes, so that no message's
    /// attributes outgrow their 16-bit lengths), the change goes to libnftables, which splits it.
    public static let maxBatchBytes = 32 * 1024
    public static let maxElements = 400

    /// The batch's messages, begin and end included; nil when it would exceed `maxBatchBytes` or a cgroup's path
    /// does not resolve (thrown as the kernel would refuse it: ENOENT).
    public static func batch(_ changes: ElementChanges, cgroupID: (String) throws(Errno) -> UInt64 = Self.cgroupID)
    throws(Errno) -> [NetlinkRequest]? {
        let elements = changes.commands.reduce(0) { n, c in
            switch c {
            case let .add(_, e): return n + e.count
            case let .delete(_, k): return n + k.count
            case .flush, .deleteChain: return n + 1
            }
        }
        guard elements <= maxElements else { return nil }
        var messages = [NftablesRequest.batchMarker(np_nfnl_msg_batch_begin)]
        for c in changes.commands { messages.append(try request(c, cgroupID: cgroupID)) }
        messages.append(NftablesRequest.batchMarker(np_nfnl_msg_batch_end))
        return messages.reduce(0) { $0 + $1.bytes.count + 4 } > maxBatchBytes ? nil : messages
    }

    /// One command of the batch as its message.
    private static func request(_ c: ElementChanges.Command, cgroupID: (String) throws(Errno) -> UInt64)
    throws(Errno) -> NetlinkRequest {
        switch c {
        case let .flush(map):
            // A DELSETELEM without elements flushes the set.
            var r = message(NFT_MSG_DELSETELEM, flags: Netlink.flagAck)
            list(&r, map: map)
            return r
        case let .add(map, elements):
            var r = message(NFT_MSG_NEWSETELEM, flags: Netlink.flagAck | Netlink.flagCreate)
            list(&r, map: map)
            var failure: Errno?
            r.nested(UInt16(NFTA_SET_ELEM_LIST_ELEMENTS.rawValue)) { l in
                for e in elements {
                    l.nested(UInt16(NFTA_LIST_ELEM.rawValue)) { a in
                        do throws(Errno) { try key(e.key, cgroupID: cgroupID, into: &a) } catch { failure = error }
                        value(e.value, into: &a)
                    }
                }
            }
            if let failure { throw failure }
            return r
        case let .delete(map, keys):
            var r = message(NFT_MSG_DELSETELEM, flags: Netlink.flagAck)
            list(&r, map: map)
            var failure: Errno?
            r.nested(UInt16(NFTA_SET_ELEM_LIST_ELEMENTS.rawValue)) { l in
                for k in keys {
                    l.nested(UInt16(NFTA_LIST_ELEM.rawValue)) { a in
                        do throws(Errno) { try key(k, cgroupID: cgroupID, into: &a) } catch { failure = error }
                    }
                }
            }
            if let failure { throw failure }
            return r
        case let .deleteChain(chain):
            var r = message(NFT_MSG_DELCHAIN, flags: Netlink.flagAck)
            r.attribute(UInt16(NFTA_CHAIN_TABLE.rawValue), string: Ruleset.table)
            r.attribute(UInt16(NFTA_CHAIN_NAME.rawValue), string: chain)
            return r
        }
    }

    private static func message(_ type: nf_tables_msg_types, flags: UInt16) -> NetlinkRequest {
        var r = NetlinkRequest(type: UInt16(NFNL_SUBSYS_NFTABLES) << 8 | UInt16(type.rawValue), flags: flags)
        r.append(header: nfgenmsg(nfgen_family: UInt8(NFPROTO_INET), version: UInt8(NFNETLINK_V0), res_id: 0))
        return r
    }

    private static func list(_ r: inout NetlinkRequest, map: String) {
        r.attribute(UInt16(NFTA_SET_ELEM_LIST_TABLE.rawValue), string: Ruleset.table)
        r.attribute(UInt16(NFTA_SET_ELEM_LIST_SET.rawValue), string: map)
    }

    private static func key(_ k: ElementChanges.Key, cgroupID: (String) throws(Errno) -> UInt64,
                            into r: inout NetlinkRequest) throws(Errno) {
        var bytes: [UInt8]
        switch k {
        case let .number(n): bytes = withUnsafeBytes(of: n) { Array($0) }
        case let .ifname(name):
            bytes = Array(name.utf8.prefix(Int(np_ifnamsiz) - 1))
            bytes += repeatElement(0, count: Int(np_ifnamsiz) - bytes.count)
        case let .cgroup(path): bytes = withUnsafeBytes(of: try cgroupID(path)) { Array($0) }
        case let .cgroupID(id): bytes = withUnsafeBytes(of: id) { Array($0) }
        }
        r.nested(UInt16(NFTA_SET_ELEM_KEY.rawValue)) { $0.attribute(UInt16(NFTA_DATA_VALUE.rawValue), bytes: bytes) }
    }

    private static func value(_ v: ElementChanges.Value, into r: inout NetlinkRequest) {
        r.nested(UInt16(NFTA_SET_ELEM_DATA.rawValue)) { d in
            func verdict(_ code: Int32, chain: String? = nil) {
                d.nested(UInt16(NFTA_DATA_VERDICT.rawValue)) { v in
                    v.attribute(UInt16(NFTA_VERDICT_CODE.rawValue), bigEndianU32: UInt32(bitPattern: code))
                    if let chain { v.attribute(UInt16(NFTA_VERDICT_CHAIN.rawValue), string: chain) }
                }
            }
            switch v {
            case .accept: verdict(NF_ACCEPT)
            case .pass: verdict(NFT_RETURN.rawValue)
            case let .goto(chain): verdict(NFT_GOTO.rawValue, chain: chain)
            case let .mark(m): d.attribute(UInt16(NFTA_DATA_VALUE.rawValue), u32: m)
            }
        }
    }

    /// The id nft gives a `cgroupsv2` path: the inode of the cgroup's directory, resolved from nft's root (a
    /// `../../../proc/self/fd/N` path names a descriptor of this process).
    public static func cgroupID(_ path: String) throws(Errno) -> UInt64 {
        var st = stat()
        _ = try sys { stat(cgroupRoot + path, &st) }
        return UInt64(st.st_ino)
    }

    /// A netfilter netlink socket for `run`.
    public static func socket() throws(Errno) -> NetlinkSocket { try NetlinkSocket(protocol: NETLINK_NETFILTER) }

    /// How a batch of `run` went.
    public enum Outcome: Equatable, Sendable {
        /// The kernel took it.
        case committed
        /// Why it was not sent, or why the kernel refused it (the whole batch is then undone).
        case refused(EdgeError)
        /// Too large for one batch: the caller runs their text through libnftables.
        case tooLarge
    }

    /// Sends the changes as one batch on `socket` (NETLINK_NETFILTER), for `operation` (what a refusal says was
    /// being done); a refusal keeps the first refused message's errno.
    public static func run(_ changes: ElementChanges, on socket: NetlinkSocket, for operation: EdgeError.Operation) -> Outcome {
        let messages: [NetlinkRequest]
        do throws(Errno) {
            guard let m = try batch(changes) else { return .tooLarge }
            messages = m
        } catch {
            return .refused(EdgeError(operation, errno: error.code, "Could not process rule: \(error)"))
        }
        var refused: (Int, Int32)?
        do throws(NetlinkFailure) {
            // The kernel answers every message of the batch (an ACK or its error) before `send` returns.
            try socket.exchange(messages, unanswered: [0, messages.count - 1], timeoutMilliseconds: 1000) { i, m in
                let e = m.errorCode ?? EPROTO
                if e != 0, refused == nil || i < refused!.0 { refused = (i, e) }
            }
        } catch {
            return .refused(EdgeError(operation, errno: error.errno?.code, "nf_tables batch: \(error)"))
        }
        guard let refused else { return .committed }
        return .refused(EdgeError(operation, errno: refused.1, "Could not process rule: \(Errno(refused.1))"))
    }
}
