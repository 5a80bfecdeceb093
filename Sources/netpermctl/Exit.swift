// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO
import NetpermProtocol

/// netpermctl's exit codes: scripts and unit files rely on them, so they are named in one place.
enum ExitCode: Int32 {
    case ok = 0
    /// The daemon answered with an error, or `check` found one.
    case failed = 1
    case usage = 2
    case unreachable = 3
    case timedOut = 4
    /// `run` could not start its scope: no service manager reachable, or it refused.
    case scopeFailed = 5
    /// `agent --notify` found no notification server that shows actions on the session bus (or no bus).
    case noNotifications = 6
    /// `agent`: the daemon lets this user answer no prompts (`UserDecisions=no`), now or since a reload: trying
    /// again changes nothing (the user unit does not restart on it).
    case mayNotAnswer = 7
}

func exit(_ code: ExitCode) -> Never { exit(code.rawValue) }

/// What must be undone before the program goes, whatever the way (`agent --notify`: its notifications). One
/// thread.
nonisolated(unsafe) var beforeExit: (() -> Void)?

/// `message` is one line, and may quote anyone's text: it is escaped whole.
func die(_ message: String, _ code: ExitCode) -> Never {
    Output.err("netpermctl: \(SafeText.escape(message))\n")
    let cleanup = beforeExit
    beforeExit = nil
    cleanup?()
    exit(code)
}
