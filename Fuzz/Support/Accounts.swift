// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
@testable import NetpermProtocol

/// Users and groups as the fuzz targets' policies name them.
struct Accounts: AccountResolver {
    func uid(forUser name: String) -> UInt32? { ["alice": 1000, "bob": 1001][name] }
    func gid(forGroup name: String) -> UInt32? { ["netperm": 990, "wheel": 10][name] }
}

/// A message meant for one line of a log, a reply or STATUS=: short, and nothing a terminal would act on (no
/// control characters, line separators or bidi controls, as SafeText defines them).
func requireOneShortLine(_ s: String, max: Int, _ what: @autoclosure () -> String) {
    require(s.utf8.count <= max, "\(what()) is \(s.utf8.count) bytes: \(s.prefix(300))")
    require(!s.unicodeScalars.contains(where: SafeText.isUnsafe), "\(what()) holds an unsafe character: \(s.debugDescription.prefix(300))")
}
