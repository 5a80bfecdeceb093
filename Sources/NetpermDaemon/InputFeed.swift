// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore

/// Where an edge object hands what it heard (a file written, a process gone, a timer fired): the interpreter, which
/// feeds it to the engine. Made before the interpreter can be named, and pointed at it once it exists.
final class InputFeed {
    var into: (Input) -> Void = { _ in }

    func callAsFunction(_ input: Input) { into(input) }
}
