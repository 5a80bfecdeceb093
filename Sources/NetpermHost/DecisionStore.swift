// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO

/// Lasting decisions on disk in the state directory (`decisions.conf`, readable INI).
public struct DecisionStore: Sendable {
    let file: StateFile
    public var path: String { file.path }

    public init(stateDir: String,
                syncDirectory: @escaping @Sendable (Int32) throws(Errno) -> Void = AtomicFile.fsyncDirectory) {
        file = StateFile(stateDir + "/decisions.conf", what: "decisions file", without: "starting with no stored decisions",
                         operation: .storeDecisions, syncDirectory: syncDirectory)
        do { try Files.makeDirectory(stateDir) } catch {
            Log.err("cannot create the state directory \(stateDir): \(error)")
        }
    }

    /// A missing file is no decisions.
    public func load() -> Decisions { file.load(empty: Decisions(), Decisions.parse) }

    /// Writes the decisions in place of the file's; safe on any thread (the daemon writes off its loop).
    public func save(_ d: Decisions) -> StoreOutcome { file.save(d.encoded()) }
}
