// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// What an `[Interface]` or `[Network]` section forces on the links it matches: their kind, metered flag and roaming
/// flag, each where the section sets it. One type for both sections, told apart by what the glob matches, so that an
/// interface's override is never taken for a network's.
public struct LinkOverride<Match: OverrideMatch>: Equatable, Sendable {
    public var glob: Glob
    public var kind: LinkKind?
    public var metered: Bool?
    /// `Roaming=`: for a modem ModemManager does not drive (a USB stick of its own).
    public var roaming: Bool?
    public init(glob: Glob, kind: LinkKind?, metered: Bool?, roaming: Bool? = nil) {
        self.glob = glob; self.kind = kind; self.metered = metered; self.roaming = roaming
    }
}

/// What an override's glob is matched against.
public protocol OverrideMatch: Sendable {}

/// A link's name.
public enum InterfaceName: OverrideMatch {}

/// A Wi-Fi network's SSID, while the link is associated to it.
public enum NetworkSSID: OverrideMatch {}

/// `[Interface GLOB]` from the config: forces the kind and/or metered flag of matching links.
public typealias InterfaceOverride = LinkOverride<InterfaceName>

/// `[Network SSID]` from the config: forces the kind and/or metered flag of a Wi-Fi link while it is associated
/// to a network whose SSID matches.
public typealias NetworkOverride = LinkOverride<NetworkSSID>

extension LinkOverride where Match == NetworkSSID {
    /// An SSID is bytes; a glob is text. Bytes that are not UTF-8 become U+FFFD, which only a wildcard matches.
    public func matches(ssid: [UInt8]) -> Bool { glob.matches(String(decoding: ssid, as: UTF8.self)) }
}
