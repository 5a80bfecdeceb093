// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermCore
import NetpermIO

/// The processes that asked an open prompt (`Effect.watchExit`, `unwatchExit`): a pidfd each, which becomes readable
/// when its process exits (`Input.exited`).
final class ExitWatch {
    private let loop: EventLoop
    private let feed: InputFeed
    private var askers: [Int32: (fd: Int32, source: IOSource)] = [:]

    init(loop: EventLoop, feed: InputFeed) {
        self.loop = loop
        self.feed = feed
    }

    func watch(_ pid: Int32) {
        do {
            // Held while its prompt is open: a number no select(2) needs (LowDescriptors).
            let fd = FD.moveAbove(try Pidfd.opening(pid), LowDescriptors.selectable)
            do {
                askers[pid] = (fd, try loop.addIO(fd: fd, events: IOEvents.readable) { [unowned self] _ in
                    unwatch(pid)
                    feed(.exited(pid: pid))
                })
            } catch {
                FD.close(fd)
                Log.warning("cannot watch pid \(pid), which asked: \(error); its prompt waits for its time-out")
            }
        } catch {
            // Gone already (ESRCH); anything else leaves the prompt to its time-out.
            if error.code == ESRCH { feed(.exited(pid: pid)) } else { Log.debug("pidfd_open(\(pid)): \(error)") }
        }
    }

    func unwatch(_ pid: Int32) {
        guard let a = askers.removeValue(forKey: pid) else { return }
        a.source.cancel()
        FD.close(a.fd)
    }

    /// Processes watched now.
    var count: Int { askers.count }
}
