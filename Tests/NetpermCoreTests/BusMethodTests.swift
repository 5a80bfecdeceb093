// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
@testable import NetpermCore
@testable import NetpermPolicy
import NetpermProtocol
import XCTest

/// The bus face's words (docs/DBUS.md): each method is one socket request, its arguments one word each, what polkit
/// must allow, and the privilege a bus caller has (uid 0, the daemon's uid, or polkit's yes; never a group).
final class BusMethodTests: XCTestCase {
    private func request(_ i: String, _ m: String, _ a: [BusArgument]) -> BusRequest? {
        try? BusMethod.request(i, m, a)
    }

    func testEachMethodIsTheSocketsRequest() {
        let r = BusNames.interface, d = BusNames.decisions
        XCTAssertEqual(request(r, "GetStatus", []), BusRequest(line: "STATUS"))
        XCTAssertEqual(request(r, "GetLinks", []), BusRequest(line: "LINKS", shape: .member("links")))
        XCTAssertEqual(request(r, "Query", []), BusRequest(line: "QUERY"))
        XCTAssertEqual(request(r, "QueryApp", [.string("maps"), .bool(false)]), BusRequest(line: "APPS", shape: .app("maps")))
        XCTAssertEqual(request(r, "QueryApp", [.string("maps"), .bool(true)]), BusRequest(line: "QUERY maps", action: .readAll))
        XCTAssertEqual(request(r, "GetApps", [.bool(false)]), BusRequest(line: "APPS", shape: .member("apps")))
        XCTAssertEqual(request(r, "GetApps", [.bool(true)]), BusRequest(line: "APPS", action: .readAll, shape: .member("apps")))
        XCTAssertEqual(request(r, "GetUsage", [.string(""), .bool(false)]), BusRequest(line: "USAGE"))
        XCTAssertEqual(request(r, "GetUsage", [.string("maps"), .bool(true)]), BusRequest(line: "USAGE maps", action: .readAll))
        XCTAssertEqual(request(r, "GetPrompts", [.bool(true)]), BusRequest(line: "PROMPTS", action: .readAll, shape: .member("prompts")))
        XCTAssertEqual(request(r, "GetDecisions", [.bool(false)]), BusRequest(line: "DECISIONS", shape: .member("decisions")))
        XCTAssertEqual(request(d, "Decide", [.string("maps"), .string("wwan"), .string("allow"), .bool(true), .bool(false)]),
                       BusRequest(line: "DECIDE maps wwan allow --once", action: .decideOwn))
        XCTAssertEqual(request(d, "Decide", [.string("maps"), .string("wwan"), .string("deny"), .bool(false), .bool(true)]),
                       BusRequest(line: "DECIDE maps wwan deny", action: .manage))
        XCTAssertEqual(request(d, "Forget", [.string("maps"), .string(""), .bool(false)]), BusRequest(line: "FORGET maps", action: .decideOwn))
        XCTAssertEqual(request(d, "Forget", [.string("maps"), .string("wwan"), .bool(true)]), BusRequest(line: "FORGET maps wwan", action: .manage))
        XCTAssertEqual(request(d, "Answer", [.uint32(7), .string("once"), .bool(false)]), BusRequest(line: "ANSWER 7 once", action: .decideOwn))
        XCTAssertEqual(request(d, "Answer", [.uint32(7), .string("allow"), .bool(true)]),
                       BusRequest(line: "ANSWER 7 allow --everyone", action: .manage))
        XCTAssertEqual(request(d, "Reload", []), BusRequest(line: "RELOAD", action: .manage))
    }

    /// The privacy report's three verbs (docs/PRIVACY.md): reading one's own needs nothing, everyone's read-all;
    /// clearing and keeping one's own is deciding for oneself, clearing everyone's managing.
    func testTheReportsVerbsAreTheSockets() {
        let r = BusNames.interface, d = BusNames.decisions
        XCTAssertEqual(request(r, "GetReport", [.string(""), .bool(false)]), BusRequest(line: "REPORT"))
        XCTAssertEqual(request(r, "GetReport", [.string("maps"), .bool(true)]), BusRequest(line: "REPORT maps", action: .readAll))
        XCTAssertEqual(request(d, "ResetReport", [.string(""), .bool(false)]), BusRequest(line: "RESET-REPORT", action: .decideOwn))
        XCTAssertEqual(request(d, "ResetReport", [.string("maps"), .bool(true)]),
                       BusRequest(line: "RESET-REPORT maps", action: .manage))
        XCTAssertEqual(request(d, "KeepReport", [.bool(true)]), BusRequest(line: "KEEP-REPORT yes", action: .decideOwn))
        XCTAssertEqual(request(d, "KeepReport", [.bool(false)]), BusRequest(line: "KEEP-REPORT no", action: .decideOwn))
        for bad in ["maps RELOAD", "--everyone", "maps\nQUIT"] {
            XCTAssertThrowsError(try BusMethod.request(r, "GetReport", [.string(bad), .bool(false)]), bad)
        }
        XCTAssertThrowsError(try BusMethod.request(d, "KeepReport", [.string("yes")]))
    }

    /// Subscribe is SUBSCRIBE of a caller's own topics (everyone's view with read-all); links and the policy are
    /// broadcast, never subscribed; a topic is one of the list, so nothing else reaches the line.
    func testSubscribeIsSubscribeOfTheCallersOwnTopics() {
        let r = BusNames.interface
        XCTAssertEqual(request(r, "Subscribe", [.strings(["mine", "prompts"]), .bool(false)]),
                       BusRequest(line: "SUBSCRIBE mine prompts", shape: .subscription))
        XCTAssertEqual(request(r, "Subscribe", [.strings(["apps", "usage"]), .bool(true)]),
                       BusRequest(line: "SUBSCRIBE apps usage", action: .readAll, shape: .subscription))
        XCTAssertEqual(request(r, "Unsubscribe", []), BusRequest(line: "", shape: .unsubscription))
        for bad in [[], ["links"], ["policy"], ["mine prompts"], ["scopes"], ["mine\nRELOAD"]] {
            XCTAssertThrowsError(try BusMethod.request(r, "Subscribe", [.strings(bad), .bool(false)]), "\(bad)")
        }
    }

    /// A name travels as one word of a line: nothing a caller sends can add a word (a flag, another verb).
    func testArgumentsAreOneWordEach() {
        for bad in ["", "maps wwan", "maps\nRELOAD", "--everyone", "-x", "a\tb", "a\u{7F}", String(repeating: "a", count: 257)] {
            XCTAssertThrowsError(try BusMethod.request(BusNames.decisions, "Decide",
                                                       [.string(bad), .string("wwan"), .string("allow"), .bool(false), .bool(false)]), bad)
        }
        XCTAssertThrowsError(try BusMethod.request(BusNames.interface, "Nope", []))
        XCTAssertThrowsError(try BusMethod.request("org.example.Other", "GetStatus", []))
    }

    func testErrorNames() {
        XCTAssertEqual(ErrorCode.permissionDenied.busErrorName, "org.netpermd.NetPerm1.Error.PermissionDenied")
        XCTAssertEqual(ErrorCode.notFound.busErrorName, "org.netpermd.NetPerm1.Error.NotFound")
        XCTAssertEqual(ErrorCode.internalError.busErrorName, "org.netpermd.NetPerm1.Error.Internal")
        XCTAssertEqual(ErrorCode.tooManyDecisions.busErrorName, "org.netpermd.NetPerm1.Error.TooManyDecisions")
    }

    /// The installed introspection data is the daemon's, and says each method's signature as the daemon reads it.
    func testTheInstalledInterfaceIsTheDaemons() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("data/org.netpermd.NetPerm1.xml")
        XCTAssertEqual(try String(contentsOf: file, encoding: .utf8), BusInterface.xml + "\n")
        // One element a line, as the file is written: the interface, the method, then its arguments.
        func attribute(_ name: String, _ line: Substring) -> String? {
            guard let r = line.range(of: name + "=\"") else { return nil }
            return String(line[r.upperBound...].prefix { $0 != "\"" })
        }
        var seen: [String: [String: String]] = [:]
        var interface = "", method: String?
        for line in BusInterface.xml.split(separator: "\n") {
            if line.contains("<interface ") { interface = attribute("name", line) ?? ""; method = nil }
            if line.contains("<method ") { method = attribute("name", line); seen[interface, default: [:]][method!] = "" }
            if line.contains("</method>") { method = nil }
            if line.contains("<arg "), let m = method, attribute("direction", line) == "in" {
                seen[interface]![m]! += attribute("type", line) ?? "?"
            }
        }
        XCTAssertEqual(seen, BusMethod.signatures)
    }

    /// On the bus the admin group grants nothing; polkit's yes does, for the one call; uid 0 and the daemon's uid
    /// always.
    func testPrivilegeOnTheBus() throws {
        let config = try parsePolicy("[Defaults]\nAdminGroup=netperm\n")
        let gid: () -> UInt32? = { 990 }
        var admin = makePeer(uid: 1001, gids: [1001, 990], exe: "/usr/bin/busctl")
        XCTAssertTrue(config.isPrivileged(admin, daemonUID: 999, adminGID: gid), "the socket takes the group")
        admin.via = .bus(authorized: false)
        XCTAssertFalse(config.isPrivileged(admin, daemonUID: 999, adminGID: gid), "the bus does not")
        admin.via = .bus(authorized: true)
        XCTAssertTrue(config.isPrivileged(admin, daemonUID: 999, adminGID: gid))
        for uid: UInt32 in [0, 999] {
            var p = makePeer(uid: uid, exe: "/usr/bin/busctl")
            p.via = .bus(authorized: false)
            XCTAssertTrue(config.isPrivileged(p, daemonUID: 999, adminGID: gid))
        }
    }

    /// The engine answers a bus caller by the same rule: a user's DECIDE is for that uid alone, an authorized one's
    /// for everyone.
    func testABusCallersDecisionIsTheirsUnlessAuthorized() {
        let h = EngineHarness(policy: "[Defaults]\nAdminGroup=netperm\n[App maps]\nExecutable=/usr/bin/maps\nWWAN=ask\n",
                              links: [Links.wwan])
        var member = Peers.admin
        member.via = .bus(authorized: false)
        XCTAssertEqual(h.request(h.connect(member), "DECIDE maps wwan allow")["decided"]?["for_uid"], 1001)
        member.via = .bus(authorized: true)
        XCTAssertEqual(h.request(h.connect(member), "DECIDE maps wwan allow")["decided"]?["for_uid"], .null)
    }

    /// The bus face's own subscriber hears prompts to signal them, and is no agent: an undecided ask stays a deny
    /// while only it listens; with an agent on the socket the prompt is raised, and it hears it too.
    func testTheBusFacesSubscriberIsNoAgent() {
        let h = EngineHarness(policy: "[App maps]\nExecutable=/usr/bin/maps\nWWAN=ask\nWiFi=deny\n", links: [Links.wwan])
        var own = makePeer(uid: 0, exe: "/usr/sbin/netpermd", pid: 2)
        own.via = .busSignals
        let observer = h.connect(own)
        _ = h.subscribe(observer, "prompts")
        let maps = h.connect(Peers.maps)
        XCTAssertEqual(h.request(maps, "QUERY")["sources"]?["wwan"], "no-agent")
        XCTAssertEqual(h.request(h.connect(Peers.root), "STATUS")["agents"], 0)
        let agent = h.connectAgent()
        XCTAssertEqual(h.request(maps, "QUERY")["reason"], "awaiting-decision")
        XCTAssertEqual(h.takeEvents(observer, named: "prompt").map { $0["app"] }, ["maps"])
        XCTAssertEqual(h.takeEvents(agent, named: "prompt").map { $0["app"] }, ["maps"])
        XCTAssertEqual(h.request(h.connect(Peers.root), "STATUS")["agents"], 1)
    }

    /// A user's own `Subscribe` to prompts over the bus is an agent for their uid, as `SUBSCRIBE prompts` on the
    /// socket is (docs/DBUS.md): their app asking raises a prompt they hear, which they answer with `Answer` for their
    /// own processes, and their app's verdict follows; another user's `Answer` of it is refused and stores nothing.
    /// (Every bus connection was an observer: alice's app stayed denied for want of an agent, no prompt raised.)
    func testAUsersBusSubscriptionAnswersTheirOwnPrompts() {
        let h = EngineHarness(policy: "[App maps]\nExecutable=/usr/bin/maps\nWWAN=ask\nWiFi=deny\n", links: [Links.wwan])
        func onTheBus(uid: UInt32, pid: Int32) -> ConnectionID {
            var p = makePeer(uid: uid, exe: "/usr/bin/python3", pid: pid)
            p.via = .bus(authorized: false)
            return h.connect(p)
        }
        let alice = onTheBus(uid: 1000, pid: 600)
        _ = h.subscribe(alice, "prompts")
        XCTAssertEqual(h.request(h.connect(Peers.root), "STATUS")["user_agents"], 1)
        let maps = h.connect(Peers.maps)
        XCTAssertEqual(h.request(maps, "QUERY")["reason"], "awaiting-decision")
        let raised = h.takeEvents(alice, named: "prompt")
        XCTAssertEqual(raised.map { $0["app"] }, ["maps"])
        let id = raised.first?["id"]?.intValue ?? -1
        let bob = onTheBus(uid: 1001, pid: 601)
        _ = h.requestError(bob, "ANSWER \(id) allow", .notFound)
        XCTAssertEqual(h.persisted.count, 0, "bob's answer stored nothing")
        let answered = h.request(onTheBus(uid: 1000, pid: 602), "ANSWER \(id) allow")
        XCTAssertEqual(answered["answered"]?["for_uid"], 1000)
        XCTAssertEqual(h.request(maps, "QUERY")["reason"], "ok")
        XCTAssertEqual(h.request(maps, "QUERY")["sources"]?["wwan"], "user-decision")
    }
}
