// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation

/// The whole of a /proc file. `String(contentsOfFile:)` trusts the size stat gives (0 for /proc) and returns what
/// one read gave, about 4 KB: a process's maps were cut there, so a test looking for a library in them passed or
/// failed with where ASLR had put it.
func readProcFile(_ path: String) throws -> String {
    guard let h = FileHandle(forReadingAtPath: path) else { throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: path]) }
    defer { try? h.close() }
    return String(decoding: try h.readToEnd() ?? Data(), as: UTF8.self)
}
