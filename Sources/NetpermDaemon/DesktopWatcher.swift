// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermHost
import NetpermIO
import NetpermPolicyFiles

/// Follows the desktop files (DesktopFiles): read at start, again whenever a watched directory changes or a user's
/// manager starts, each read on a thread of its own and at most every `2 × what the last one took` (at least
/// `debounceMicroseconds`): a user writing desktop files in a loop makes reads, never work on the loop.
public final class DesktopWatcher {
    static let debounceMicroseconds: UInt64 = 200_000
    static let maxSpacingMicroseconds: UInt64 = 5_000_000

    private let loop: EventLoop
    private let files: DesktopFiles
    /// Never on the loop: without a thread desktop apps are not named.
    private let thread: Worker<(DesktopFiles.Read, took: UInt64)>
    private let changed: (DesktopCatalog) -> Void
    private var watches: [String: TimerSource] = [:]
    private var timer: TimerSource?
    private var uids: Set<UInt32> = []
    private var notBefore: UInt64 = 0
    private var skippedLogged: Set<String> = []

    public init(loop: EventLoop, files: DesktopFiles, changed: @escaping (DesktopCatalog) -> Void) {
        self.loop = loop
        self.files = files
        self.changed = changed
        thread = Worker(loop: loop, doing: "reading desktop files", fallback: .skipped)
        schedule()
    }

    /// The users whose managers run now (`user@UID.service`): their own files are read too.
    /// Whether the files are read at all (off the loop): a catalog is to come.
    public var reads: Bool { thread.threaded }

    public func users(_ new: Set<UInt32>) {
        guard new != uids else { return }
        uids = new
        schedule()
    }

    private func read() {
        timer = nil
        let users = uids.sorted()
        thread.run({ [files] in
            let start = Clock.monotonicMicroseconds()
            let accounts = SystemAccounts()
            let homes = users.compactMap { uid in accounts.home(of: uid).map { (uid: uid, home: $0) } }
            return (files.read(users: homes), Clock.monotonicMicroseconds() - start)
        }) { [unowned self] result in self.apply(result.0, took: result.took) }
    }

    private func apply(_ read: DesktopFiles.Read, took: UInt64) {
        notBefore = Clock.monotonicMicroseconds() + min(Self.maxSpacingMicroseconds, max(Self.debounceMicroseconds, 2 * took))
        for s in read.skipped where skippedLogged.count < 256 && skippedLogged.insert(s).inserted {
            Log.info("desktop files: " + s)
        }
        let wanted = Set(read.watched)
        for (path, w) in watches where !wanted.contains(path) { w.cancel(); watches[path] = nil }
        for path in wanted where watches[path] == nil {
            watches[path] = try? loop.watch(directory: path) { [unowned self] _ in self.schedule() }
        }
        changed(read.catalog)
    }

    private func schedule() {
        guard timer == nil else { return }
        // Asked for during a read: once it is handed over.
        guard !thread.after({ [unowned self] in schedule() }) else { return }
        let now = Clock.monotonicMicroseconds()
        let delay = max(notBefore > now ? notBefore - now : 0, watches.isEmpty ? 0 : Self.debounceMicroseconds)
        timer = try? loop.addTimer(afterMicroseconds: max(delay, 1)) { [unowned self] in self.read() }
    }
}
