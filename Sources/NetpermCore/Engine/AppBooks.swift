// SPDX-License-Identifier: LGPL-2.1-or-later
/// What the engine knows of apps beside the policy: their connection tags, the desktop apps, the apps known by
/// what they run.
struct AppBooks {
    /// Every app's connection tag, kept while it is in the policy (and a while after): what the rules tag
    /// connections with and counts are kept by.
    var tags = TagTable()
    /// Desktop apps running and installed (Engine+Desktop.swift).
    var desktop = DesktopBook()
    /// Apps known by what they run, and the scopes asked for them (Engine+Exec.swift).
    var execs = ExecBook()
}
