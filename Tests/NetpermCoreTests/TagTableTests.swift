// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
import XCTest

/// Issue 31, point 10: an app's connection tag never moves while it is in the policy, whatever is added or removed
/// (docs/USAGE.md, "Tags"). `aa1122` and `zz181589` hash alike: adding aa1122 gave it zz's tag, and zz's counted
/// bytes and budget went to aa1122.
final class TagTableTests: XCTestCase {
    func testTheIssuesPairCollides() {
        XCTAssertEqual(ConnectionTags.hash("aa1122"), ConnectionTags.hash("zz181589"))
        XCTAssertEqual(ConnectionTags.base | ConnectionTags.hash("zz181589"), 0x6EAD_F119)
    }

    func testAnAppAddedBesideAnotherNeverMovesIt() {
        let before = TagTable().assigning(["zz181589", "maps"])
        let zz = before.tags["zz181589"]!
        XCTAssertEqual(zz, 0x6EAD_F119)
        let after = before.assigning(["aa1122", "zz181589", "maps"])
        XCTAssertEqual(after.tags["zz181589"], zz, "zz keeps its tag")
        XCTAssertEqual(after.tags["aa1122"], zz + 1, "the newcomer takes the next free one")
        XCTAssertEqual(after.tags["maps"], before.tags["maps"])
        // Without a table, name order decides: what moved zz.
        XCTAssertEqual(ConnectionTags.assign(["aa1122", "zz181589"])["aa1122"], zz)
    }

    func testARemovedAppsTagStaysReservedAndComesBack() {
        let t = TagTable().assigning(["zz181589"]).assigning([])
        XCTAssertEqual(t.tags["zz181589"], 0x6EAD_F119, "kept: its connections may still be in conntrack")
        XCTAssertEqual(t.tags(of: ["aa1122"]), [:])
        let back = t.assigning(["aa1122", "zz181589"])
        XCTAssertEqual(back.tags["zz181589"], 0x6EAD_F119)
        XCTAssertEqual(back.tags["aa1122"], 0x6EAD_F11A)
        XCTAssertEqual(back.tags(of: ["zz181589"]), ["zz181589": 0x6EAD_F119])
    }

    func testRemovedAppsAreRetainedUpToABound() {
        var t = TagTable().assigning((0..<(TagTable.retained + 10)).map { "app\($0)" })
        t = t.assigning(["app0"])
        XCTAssertEqual(t.tags.count, TagTable.retained + 1, "the current app and as many removed ones as retained")
        XCTAssertNotNil(t.tags["app0"])
    }

    func testTheFileReadsBackAndNamesItsLine() throws {
        let t = TagTable().assigning(["maps", "web", "a name with spaces"])
        XCTAssertEqual(try TagTable.parse(t.encoded(), path: "/var/lib/netpermd/tags"), t)
        XCTAssertThrowsError(try TagTable.parse("version 1\n0x6e800001 maps\n0x6e800001 web\n", path: "/s/tags")) {
            XCTAssertEqual("\($0)".hasPrefix("/s/tags:3:"), true, "\($0)")
        }
        XCTAssertThrowsError(try TagTable.parse("version 1\n0x00000001 maps\n", path: "/s/tags")) {
            XCTAssertEqual("\($0)".hasPrefix("/s/tags:2:"), true, "\($0)")
        }
        XCTAssertThrowsError(try TagTable.parse("version 2\n", path: "/s/tags"))
    }

    /// In the engine: a reload adding aa1122 leaves zz's connections zz's in the rules (its uid's tag, its budget's
    /// quota) and saves the table; a restart from the saved table gives the same tags.
    func testAReloadKeepsTagsAndARestartReadsThem() throws {
        func policy(_ extra: String) -> String {
            """
            [Usage]
            Count=yes
            [Enforcement]
            Mode=block
            [App zz181589]
            User=4701
            MeteredBudget=1M
            \(extra)
            """
        }
        let h = EngineHarness(policy: policy(""), links: [Links.lo, Links.wwan])
        let saved = try XCTUnwrap(h.savedTags.last)
        XCTAssertEqual(saved.tags, ["zz181589": 0x6EAD_F119])
        h.reload(policy: policy("[App aa1122]\nUser=4702\nMeteredBudget=1M"))
        let table = try XCTUnwrap(h.savedTags.last)
        XCTAssertEqual(table.tags["zz181589"], 0x6EAD_F119)
        XCTAssertEqual(table.tags["aa1122"], 0x6EAD_F11A)
        let rules = try XCTUnwrap(h.scripts.last)
        XCTAssertTrue(try XCTUnwrap(h.scripts.first).contains("4701 : 0x6eadf119"))
        XCTAssertFalse(rules.contains("4701"), "zz's elements are left as they are: \(rules)")
        XCTAssertTrue(rules.contains("tag_uid { 4702 : 0x6eadf11a }"), rules)
        let usage = try XCTUnwrap(h.usageScripts.last)
        XCTAssertTrue(usage.contains("0x6eadf119 : \"b_6eadf119\""), "zz's budget is its own")
        XCTAssertTrue(usage.contains("0x6eadf11a : \"b_6eadf11a\""), usage)

        let restarted = EngineHarness(policy: policy("[App aa1122]\nUser=4702\nMeteredBudget=1M"), links: [Links.lo, Links.wwan],
                                      tags: try TagTable.parse(table.encoded(), path: "tags"))
        XCTAssertTrue(restarted.savedTags.isEmpty, "nothing new to write")
        let whole = try XCTUnwrap(restarted.scripts.first)
        XCTAssertTrue(whole.contains("4701 : 0x6eadf119") && whole.contains("4702 : 0x6eadf11a"), whole)
    }
}
