// SPDX-License-Identifier: LGPL-2.1-or-later
import CNftables
import NetpermCore
import NetpermIO

/// The DNS answers the counting table logs for the privacy report (`UsageRules.reportAnswerRule`): NFLOG messages
/// whose prefix is the report's, each with its packet (NFULA_PAYLOAD) and the packet's mark as the rule set it while
/// logging (NFULA_MARK): its connection's tag, the app that asked. Pure: bytes in, answers out; an answer whose connection carries no tag, or that is
/// not a well-formed DNS answer, is dropped.
public enum ReportAnswers {
    public static func sightings(in b: UnsafeRawBufferPointer) -> [ReportSighting] {
        let packet = UInt16(NFNL_SUBSYS_ULOG << 8) | UInt16(NFULNL_MSG_PACKET.rawValue)
        return NetlinkMessages(b).compactMap { m in
            guard m.type == packet else { return nil }
            let a = m.attributes(after: MemoryLayout<nfgenmsg>.size)
            let prefix = a.first(UInt16(NFULA_PREFIX.rawValue)).map(Netlink.string)
            let mark = a.first(UInt16(NFULA_MARK.rawValue)).flatMap(Netlink.bigEndianU32)
            if let prefix, prefix != UsageRules.reportLogPrefix {
                let out = a.first(UInt16(NFULA_IFINDEX_OUTDEV.rawValue)).flatMap(Netlink.bigEndianU32).map { Int32(bitPattern: $0) }
                return ReportRefusals.sighting(prefix: prefix, mark: mark, outIndex: out,
                                               payload: a.first(UInt16(NFULA_PAYLOAD.rawValue)).map(Array.init) ?? [])
            }
            guard prefix == UsageRules.reportLogPrefix, let mark,
                  ReportLabels.isTag(mark),
                  let payload = a.first(UInt16(NFULA_PAYLOAD.rawValue)),
                  let answer = DNSAnswer.parse(ipPacket: Array(payload)) else { return nil }
            return .answer(tag: mark, answer)
        }
    }
}
