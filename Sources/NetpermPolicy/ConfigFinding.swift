// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// A problem of a policy as JSON: RELOAD's reply and STATUS list the warnings of the policy in force this way, and
/// `netpermctl check --json` every error and warning, so a script reads one shape wherever it meets them.
extension ConfigError {
    /// `{"file":...,"line":N,"section":"[App maps]","severity":"warning","message":...}`; `line` and `section` are
    /// null for a problem of the whole file (it cannot be read) or outside any section.
    public func write(to w: inout JSONWriter) {
        w.field("file", path)
        w.field("line", line > 0 ? line : nil)
        w.field("section", section)
        switch severity {
        case .error: w.field("severity", literal: "error")
        case .warning: w.field("severity", literal: "warning")
        }
        w.field("message", message)
    }
}
