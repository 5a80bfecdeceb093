// SPDX-License-Identifier: LGPL-2.1-or-later
/// `[Report]`: the privacy report, what each app reached and was refused (docs/PRIVACY.md).
public struct ReportSettings: Equatable, Sendable {
    /// `Enabled=`: keep the report (off until the admin turns it on; off deletes what was kept).
    public var enabled = false
    /// `Days=`: days kept, today included.
    public var days = 7

    public static let dayRange = 1...31

    public init() {}
}
