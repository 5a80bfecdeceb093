// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO

/// The apps' connection tags on disk in the state directory (`tags`, TagTable): read at start, before the first
/// rules, and written whenever a policy adds an app.
public struct TagStore: Sendable {
    let file: StateFile
    public var path: String { file.path }

    public init(stateDir: String) {
        file = StateFile(stateDir + "/tags", what: "connection tags file",
                         without: "giving apps their tags again (connections still open may be taken for other apps)",
                         operation: .storeTags)
    }

    /// A missing file is no app tagged yet.
    public func load() -> TagTable { file.load(empty: TagTable(), TagTable.parse) }

    public func save(_ t: TagTable) -> StoreOutcome { file.save(t.encoded()) }
}
