// SPDX-License-Identifier: LGPL-2.1-or-later

/// A value handed between the loop and a thread, whose holder drops it where it chooses (`drop`): where its last
/// reference goes, so does the work of freeing what it holds. Set on the loop, read by one thread at a time, dropped
/// once: never touched by two threads at once.
final class LastReference<T>: @unchecked Sendable {
    private(set) var value: T?

    init(_ value: T) { self.value = value }

    func drop() { value = nil }
}
