// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermPolicy
import NetpermProtocol

/// What the daemon writes, read back as a tree: tests compare members, the daemon never builds one.
func parsedObject(_ write: (inout JSONWriter) -> Void) -> JSON {
    let b = ByteBuffer(capacity: 256)
    var w = JSONWriter(b)
    write(&w)
    w.close()
    let text = String(decoding: UnsafeBufferPointer(start: b.base, count: b.count), as: UTF8.self)
    do { return try JSONParser.parse(text) } catch { fatalError("the daemon wrote invalid JSON: \(text): \(error)") }
}

extension Link {
    var json: JSON { parsedObject { write(to: &$0) } }
}

extension Verdict {
    var json: JSON { parsedObject { write(to: &$0) } }
}

extension PeerIdentity {
    var json: JSON { parsedObject { write(to: &$0) } }
}

extension Prompt {
    var json: JSON { parsedObject { write(to: &$0) } }
}
