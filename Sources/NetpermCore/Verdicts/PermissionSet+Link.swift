// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

extension PermissionSet {
    /// May the app use `link`: its kind allows it and, when it is metered or roaming, so do `metered` and
    /// `roaming`. A link whose roaming is unknown (`nil`) is judged as at home.
    public func allows(_ link: Link) -> Bool {
        self[link.kind] == .allow && (!link.metered || metered == .allow) && (link.roaming != true || roaming == .allow)
    }

    /// What keeps the app off `link`, by dimension: its kind's, when metered `metered`'s and when roaming
    /// `roaming`'s setting where it is not allow. Empty: the app may use it.
    public func blocking(_ link: Link) -> [(PolicyDimension, Permission)] {
        var out: [(PolicyDimension, Permission)] = []
        if let d = PolicyDimension(kind: link.kind), self[d] != .allow { out.append((d, self[d])) }
        if link.metered, metered != .allow { out.append((.metered, metered)) }
        if link.roaming == true, roaming != .allow { out.append((.roaming, roaming)) }
        return out
    }
}
