@testable import NetpermCore

/// Users and groups as the fuzz targets' policies name them.
struct Accounts: AccountResolver {
    func uid(forUser name: String) -> UInt32? { ["alice": 1000, "bob": 1001][name] }
    func gid(forGroup name: String) -> UInt32? { ["netperm": 990, "wheel": 10][name] }
}

/// A message meant for one line of a log, a reply or STATUS=: short, and no control characters.
func requireOneShortLine(_ s: String, max: Int, _ what: @autoclosure () -> String) {
    require(s.utf8.count <= max, "\(what()) is \(s.utf8.count) bytes: \(s.prefix(300))")
    require(!s.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "\(what()) holds a control character: \(s.debugDescription.prefix(300))")
}
