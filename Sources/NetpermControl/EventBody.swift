// SPDX-License-Identifier: LGPL-2.1-or-later
/// The part of an event line after each subscriber's own head (`{"event":...,"seq":N`): written once and queued for
/// every subscriber that wants it, never copied per subscriber. 2,000 subscribers that never read, each 1 MiB
/// behind on a link of 700 addresses, held 2,000 copies of the same events (an RSS of 2.3 GB); they hold one now.
/// What all the bodies alive take together is counted (`ControlServer.queuedTotal`) for the bound on all queues.
public final class EventBody {
    public let bytes: [UInt8]
    private let tally: ControlServer.Tally

    init(_ bytes: [UInt8], tally: ControlServer.Tally) {
        self.bytes = bytes
        self.tally = tally
        tally.shared += bytes.count
    }

    deinit { tally.shared -= bytes.count }
}
