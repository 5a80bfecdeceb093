// SPDX-License-Identifier: LGPL-2.1-or-later

/// The order the report's entries go in at its bound: a queue of keys, oldest made first, each with the last time
/// it had when queued. The head is dropped unless it was used since (its `last` is later), in which case it goes to
/// the back with its new time: a second chance, as a page cache's reclaim gives, close to "oldest last time
/// first" without sorting anything. Each new entry past the bound costs one drop, in constant time (amortized):
/// dropping an eighth of the entries at once (a whole second of them under a flood) sorted the 16,384 entries' times
/// and removed thousands of entries in one pass of the loop (BENCHMARKS.md, figure 25). The order is the inputs', so it is the
/// same in every process.
struct ReportAge: Equatable, Sendable {
    private var keys: [ReportKey] = []
    private var stamps: [Int] = []
    private var head = 0

    /// The keys queued, dropped ones not yet passed included.
    var count: Int { keys.count - head }

    /// A new entry.
    mutating func made(_ key: ReportKey, at time: Int) {
        keys.append(key)
        stamps.append(time)
    }

    /// The queue made again from `entries`, oldest last time first (ties in the keys' order): after a restore, or
    /// once dropped entries (cleared, expired) fill more than half of it.
    mutating func rebuild(_ entries: [ReportKey: ReportEntry]) {
        let sorted = entries.sorted { ($0.value.last, $0.key) < ($1.value.last, $1.key) }
        keys = sorted.map(\.key)
        stamps = sorted.map(\.value.last)
        head = 0
    }

    /// Removes the oldest entry of `entries` not used since it was queued; its key, or nil when none is left.
    mutating func dropOne(_ entries: inout [ReportKey: ReportEntry]) -> ReportKey? {
        while head < keys.count {
            let key = keys[head], stamp = stamps[head]
            head += 1
            guard let last = entries[key]?.last else { continue }  // cleared or expired already
            if last > stamp {
                made(key, at: last)
                continue
            }
            entries.removeValue(forKey: key)
            compact(entries)
            return key
        }
        compact(entries)
        return nil
    }

    /// What was passed is freed once it is half the queue; a queue twice the entries (keys cleared or expired, or
    /// queued twice) is made again. Also after entries are cleared or expire: below the bound nothing is dropped,
    /// and the queue would keep every key ever made.
    mutating func compact(_ entries: [ReportKey: ReportEntry]) {
        if count > 2 * entries.count + 1024 {
            rebuild(entries)
        } else if head > 1024, head * 2 > keys.count {
            keys.removeFirst(head)
            stamps.removeFirst(head)
            head = 0
        }
    }
}
