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
        // Over nf_tables messages, not libnftables (a Recommends): without it a remove left the rules in force
        // ("cannot load libnftables", then "no rules to remove"), and denied apps cut off until a reboot.
        // The rules' table and a handover's in one transaction, then the usage table.
        for (family, tables) in [(Ruleset.family, [Ruleset.table, Ruleset.handoverTable]),
                                 (UsageRules.family, [UsageRules.table])] {
            do {
                removed += try NftablesTable.delete(tables).map { "table \(family) \($0)" }
            } catch {
                Output.write(STDERR_FILENO, "netpermd: cannot remove table \(family) \(tables[0]): \(error)\n")
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
