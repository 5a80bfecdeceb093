// SPDX-License-Identifier: LGPL-2.1-or-later
/// How replies are printed: for people, the daemon's JSON as it is (--json), or for scripts (-t, --terse).
enum OutputMode {
    case human
    case json
    case terse
}
