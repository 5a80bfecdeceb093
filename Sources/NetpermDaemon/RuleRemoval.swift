// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermCore
import NetpermIO
import NetpermNftables

/// `netpermd --remove-rules`: what an uninstall runs. A stopped daemon leaves its rules in force (a restart must not
/// open them), so they go only with Mode=off or this: the nft table (and a handover's), the usage table (which goes
/// on counting for the next process otherwise), and steering's routing rules and tables. Prints what it removed;
/// exit 1 if something could not be.
public enum RuleRemoval {
    public static func run() -> Int32 {
        var failed = false
        var removed: [String] = []
        let tables = [Ruleset.table, Ruleset.handoverTable].filter {
            (try? NftablesTable.exists(name: $0)) ?? true
        }
        if !tables.isEmpty {
            do {
                try Nftables().run(Ruleset.removal)
                removed += tables.map { "table \(Ruleset.family) \($0)" }
            } catch {
                Output.write(STDERR_FILENO, "netpermd: cannot remove table \(Ruleset.family) \(Ruleset.table): \(error)\n")
                failed = true
            }
        }
        if (try? NftablesTable.exists(name: UsageRules.table)) ?? true {
            do {
                try Nftables().run(UsageRules.removal)
                removed.append("table \(UsageRules.family) \(UsageRules.table)")
            } catch {
                Output.write(STDERR_FILENO, "netpermd: cannot remove table \(UsageRules.family) \(UsageRules.table): \(error)\n")
                failed = true
            }
        }
        switch Steerer.removeLeftovers() {
        case let .success(n): if n > 0 { removed.append("\(n) of steering's routing rules and routes") }
        case let .failure(e):
            Output.write(STDERR_FILENO, "netpermd: cannot remove steering's rules and tables: \(e)\n")
            failed = true
        }
        Output.write(STDOUT_FILENO, removed.isEmpty ? "netpermd: no rules to remove\n"
                                                    : "netpermd: removed " + removed.joined(separator: ", ") + "\n")
        return failed ? 1 : 0
    }
}
