// SPDX-License-Identifier: LGPL-2.1-or-later
// The decisions loader: Decisions.parse and encoded(). Whatever parses must come back the same through
// encoded(); whatever is built with set/forget must too; what does not parse is refused with a short message.
@testable import NetpermCore
@testable import NetpermPolicy
@testable import NetpermProtocol

func roundTrip(_ d: Decisions, _ what: @autoclosure () -> String) {
    let text = d.encoded()
    do {
        let back = try Decisions.parse(text, path: "/var/lib/netpermd/decisions.conf")
        var lasting = d
        lasting.dropOnce()
        require(back == lasting, "\(what()): parse(encoded()) differs:\n\(text)")
        require(back.encoded() == text, "\(what()): encoded() is not stable:\n\(text)")
    } catch {
        require(false, "\(what()): encoded() does not parse (\(error)):\n\(text)")
    }
}

// Every dimension a decision can be about (loopback has none: it is always allowed).
let kinds = PolicyDimension.allCases

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = bytes(data, size)
    let text = String(decoding: input, as: UTF8.self)
    do {
        let d = try Decisions.parse(text, path: "/var/lib/netpermd/decisions.conf")
        require(d.once.isEmpty && d.userOnce.isEmpty, "the file gave --once decisions")
        for (app, table) in d.lasting.merging(d.userLasting.values.flatMap { $0 }, uniquingKeysWith: { a, _ in a }) {
            require(AppPolicy.isValidID(app), "an invalid app id loaded: \(app.debugDescription)")
            require(!table.isEmpty && table.values.allSatisfy { $0 != .ask }, "app \(app): \(table)")
        }
        roundTrip(d, "the file as parsed")
    } catch {
        require(error.line >= 0 && error.line <= text.utf8.reduce(1) { $0 + ($1 == 0x0A ? 1 : 0) }, "line \(error.line): \(error)")
        requireOneShortLine(error.description, max: 1024, "the decisions error")
    }

    // The same bytes as DECIDE / FORGET steps on app ids taken from the input's words.
    let words = text.split(whereSeparator: { " \n\t[]=".contains($0) }).map(String.init).filter(AppPolicy.isValidID)
    let apps = words.isEmpty ? ["firefox"] : Array(words.prefix(8))
    // Bit 6 makes the step a user's own (uid 1000 or 1001 by bit 7), for everyone otherwise.
    var d = Decisions()
    for (n, b) in input.prefix(256).enumerated() {
        let app = apps[(n + Int(b >> 4)) % apps.count]
        let kind = kinds[Int(b & 7) % kinds.count]
        let uid: UInt32? = b & 0x40 == 0 ? nil : 1000 + UInt32(b >> 7)
        switch b & 0x18 {
        case 0x00: d.set(app, kind, .allow, once: b & 0x20 != 0, uid: uid)
        case 0x08: d.set(app, kind, .deny, once: b & 0x20 != 0, uid: uid)
        case 0x10: d.forget(app, kind: kind, uid: uid)
        default: d.forget(app, kind: nil, uid: uid)
        }
        for (a, table) in d.lasting { require(!table.isEmpty, "an empty table left for \(a)") }
        for (a, table) in d.once { require(!table.isEmpty, "an empty once-table left for \(a)") }
        for (u, tables) in d.userLasting.merging(d.userOnce, uniquingKeysWith: { a, _ in a }) {
            require(!tables.isEmpty && tables.values.allSatisfy { !$0.isEmpty }, "an empty table left for uid \(u)")
        }
    }
    roundTrip(d, "decisions built by steps")
    return 0
}
