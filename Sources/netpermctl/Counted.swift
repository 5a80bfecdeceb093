// SPDX-License-Identifier: LGPL-2.1-or-later
/// "1 app", "2 apps": how netpermctl counts things for people.
func counted(_ n: Int, _ noun: String) -> String { "\(n) \(noun)\(n == 1 ? "" : "s")" }
