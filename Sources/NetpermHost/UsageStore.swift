// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO

/// The usage totals on disk in the state directory (`usage`, docs/USAGE.md): read at start, written atomically at
/// most every `SaveIntervalSec=` and at every stop.
public struct UsageStore: Sendable {
    let file: StateFile
    public var path: String { file.path }

    public init(stateDir: String,
                syncDirectory: @escaping @Sendable (Int32) throws(Errno) -> Void = AtomicFile.fsyncDirectory) {
        file = StateFile(stateDir + "/usage", what: "usage file", without: "counting from nothing", operation: .saveUsage,
                         syncDirectory: syncDirectory)
    }

    /// A missing file is nothing counted yet.
    public func load() -> UsageBook { file.load(empty: UsageBook(), UsageBook.parse) }

    public func save(_ book: UsageBook) -> StoreOutcome { file.save(book.encoded()) }
}
