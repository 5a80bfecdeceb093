// SPDX-License-Identifier: LGPL-2.1-or-later

/// What start-up still waits for before its code may leave the RSS (`onSettled`): READY=1 sent, and the answers that
/// come after it (the first desktop files read, the usage reading READY's input asked for).
struct StartupSettling {
    var ready = false
    var desktopRead = false
    private(set) var done = false
    /// Whether a desktop catalog is to come (false when the desktop files cannot be read off the loop).
    var awaitsDesktopFiles = true
    /// Called once, when start-up's work is done: the daemon releases start-up's code pages then (CodePages), so
    /// that what ran after READY=1 (reading the desktop files and the usage counters) does not stay resident.
    var onSettled: () -> Void = {}

    /// Whether start-up is done now, given whether other answers are still to come (`busy`): then `onSettled` runs,
    /// once.
    mutating func check(busy: Bool) {
        guard !done, ready, desktopRead || !awaitsDesktopFiles, !busy else { return }
        done = true
        onSettled()
    }
}
