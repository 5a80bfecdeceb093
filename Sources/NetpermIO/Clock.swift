// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux
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

    /// CLOCK_BOOTTIME in seconds: time that passes whatever the wall clock does, suspend included.
    public static func bootSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_BOOTTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Whether the kernel's NTP status says the wall clock is synchronized (what chrony, ntpd and systemd-timesyncd
    /// keep, and `timedatectl` shows): not STA_UNSYNC, and an estimated error below 16 s.
    public static func kernelSynchronized() -> Bool {
        var tx = timex()
        let state = adjtimex(&tx)
        return state >= 0 && state != NP_TIME_ERROR && tx.status & NP_STA_UNSYNC == 0 && tx.maxerror < 16_000_000
    }

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
