// SPDX-License-Identifier: LGPL-2.1-or-later

/// Which open prompts `agent --notify` shows as questions of their own: a phone asks one question at a time, and a
/// notification server buried under hundreds of critical, resident notifications shows none of them well (dunst
/// died under 228). At most `questions` are shown; the rest wait, counted in one summary notification, and come up
/// as those shown close. They are picked round-robin by uid, oldest first within each: an admin's agent sees every
/// user's prompts, and one user's flood must not bury another's single question behind it.
enum NotifyLineup {
    /// The most prompts shown as questions at once (the summary of the rest comes besides).
    static let questions = 3

    /// A prompt waiting to be shown: its id, and whose it is (nil: everyone's, a process of root's).
    struct Waiting: Equatable {
        var prompt: Int
        var uid: Int?
    }

    /// The prompts to show, from `waiting` (oldest first): the oldest of each uid (the uids in the order of their
    /// oldest prompt), then the second oldest of each, and so on, `count` in all.
    static func pick(_ waiting: [Waiting], count: Int = questions) -> [Int] {
        var uids: [Int?] = []
        var queues: [Int?: [Int]] = [:]
        for w in waiting {
            if queues[w.uid] == nil { uids.append(w.uid) }
            queues[w.uid, default: []].append(w.prompt)
        }
        var picked: [Int] = []
        var round = 0
        while picked.count < count {
            var any = false
            for uid in uids {
                guard let q = queues[uid], round < q.count else { continue }
                any = true
                picked.append(q[round])
                if picked.count == count { break }
            }
            guard any else { break }
            round += 1
        }
        return picked
    }
}
