// SPDX-License-Identifier: LGPL-2.1-or-later
/// Where ModemManager says the modem behind a link is registered (`Modem3gpp.RegistrationState`): at home,
/// roaming on another operator's network, or neither (searching, denied, idle, unknown). The link is the modem's
/// bearer's interface, or one of its network ports (docs/CLASSIFICATION.md, "ModemManager").
public enum ModemRegistration: String, Equatable, Hashable, Sendable {
    case home, roaming, unknown

    /// MMModem3gppRegistrationState: HOME 1, HOME_SMS_ONLY 6, HOME_CSFB_NOT_PREFERRED 9 are home; ROAMING 5,
    /// ROAMING_SMS_ONLY 7, ROAMING_CSFB_NOT_PREFERRED 10 roaming; IDLE 0, SEARCHING 2, DENIED 3, UNKNOWN 4,
    /// EMERGENCY_ONLY 8, ATTACHED_RLOS 11 and anything newer say neither.
    public init(dbus value: UInt32) {
        switch value {
        case 1, 6, 9: self = .home
        case 5, 7, 10: self = .roaming
        default: self = .unknown
        }
    }

    /// Roaming or not; nil when the modem is registered nowhere it can say.
    public var roaming: Bool? {
        switch self {
        case .home: return false
        case .roaming: return true
        case .unknown: return nil
        }
    }
}
