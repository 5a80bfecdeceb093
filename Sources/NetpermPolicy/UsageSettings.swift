// SPDX-License-Identifier: LGPL-2.1-or-later
/// `[Usage]`: counting each app's traffic in the kernel, and the periods its totals are kept for (docs/USAGE.md).
public struct UsageSettings: Equatable, Sendable {
    /// `Count=`: count (in every enforcement mode; Mode=off loads a table that only counts).
    public var count = false
    /// `PeriodStart=`: the day of the month a period starts on (a shorter month's last day when it has fewer).
    public var periodStart = 1
    /// `SaveIntervalSec=`: the totals are read and, when they moved, written to the state directory at most this
    /// often (and at every stop): what a machine's crash may lose.
    public var saveIntervalSec = 60
    /// `MetricsApps=`: METRICS writes usage series for each app while the policy has at most this many apps; past
    /// that, for the apps with a budget only, the others summed as one (`app="(unbudgeted)"`). The series are then
    /// bounded by the policy's shape, never by traffic: a 10,001-app policy wrote 80,288 series (6.2 MB).
    public var metricsApps = 100

    public init() {}
}
