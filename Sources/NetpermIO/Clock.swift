// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc

/// The clocks, read in one place.
public enum Clock {
    /// CLOCK_MONOTONIC in microseconds (what MONOTONIC_USEC= and the loop's timers use).
    public static func monotonicMicroseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
    }

    public static func monotonicSeconds() -> Double { Double(monotonicMicroseconds()) / 1e6 }

    public static func realtimeSeconds() -> Int {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return ts.tv_sec
    }

    /// The calendar day in the machine's time zone (TZ, /etc/localtime) at `epoch` seconds.
    public static func localDay(_ epoch: Int) -> (year: Int, month: Int, day: Int) {
        var t = time_t(epoch)
        var parts = tm()
        localtime_r(&t, &parts)
        return (Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday))
    }
}
