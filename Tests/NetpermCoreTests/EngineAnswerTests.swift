// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermProtocol
import XCTest

/// Prompts that cannot go wrong (PROTOCOL.md, "Prompts"): one question per app for every pending kind, answered by
/// ANSWER with the phone's choices, refused once the prompt has closed (so a late answer stores nothing), withdrawn
/// when every process that asked has exited.
final class EngineAnswerTests: XCTestCase {
    /// EnginePromptTests' policy, maps asking on metered links too (it asks on WWAN by [Defaults]).
    private let policy = EnginePromptTests.policy.replacingOccurrences(of: "Executable=/usr/bin/maps\n",
                                                                       with: "Executable=/usr/bin/maps\nMetered=ask\n")

    private let maps = makePeer(uid: 1000, exe: "/usr/bin/maps", pid: 500)

    private func harness(_ links: [Link] = [Links.wwan]) -> (EngineHarness, agent: ConnectionID) {
        let h = EngineHarness(policy: policy, links: links, agents: true)
        return (h, h.connections.keys.max()!)
    }

    /// WWAN=ask and Metered=ask on a metered cellular link: one prompt about both, and one answer opens both.
    func testOneQuestionForEveryPendingKindAndOneAnswerForAll() {
        let (h, agent) = harness()
        let app = h.connect(maps)
        XCTAssertEqual(h.request(app, "QUERY")["pending_kinds"], .array(["wwan", "metered"]))
        let prompts = h.takeEvents(agent, named: "prompt")
        XCTAssertEqual(prompts.count, 1)
        XCTAssertEqual(prompts.first?["kinds"], .array(["wwan", "metered"]))
        XCTAssertEqual(prompts.first?["link"], .object([("name", "wwan0"), ("kind", "wwan"), ("metered", true), ("roaming", false), ("over", .null)]))
        let got = h.send(agent, "ANSWER 1 allow --everyone").map(EngineHarness.parse)
        let r = got.last ?? .null
        XCTAssertEqual(got.dropLast().map { $0["event"] }, ["prompt-answered"], "the agent hears it before the reply")
        XCTAssertEqual(r["answered"], .object([("id", 1), ("app", "maps"), ("kinds", .array(["wwan", "metered"])),
                                               ("choice", "allow"), ("decision", "allow"), ("once", false), ("for_uid", .null)]))
        XCTAssertEqual(r["available"], true)
        XCTAssertEqual(h.persisted.last?.decision("maps", .wwan)?.0, .allow)
        XCTAssertEqual(h.persisted.last?.decision("maps", .metered)?.0, .allow)
        XCTAssertEqual(h.request(app, "QUERY")["reason"], "ok")
        XCTAssertEqual(h.takeEvents(agent, named: "prompt"), [], "nothing left to ask")
    }

    /// "Wi-Fi only" denies every kind asked about, for good; "once" allows them until a restart or a policy change.
    func testDenyAndOnce() {
        let (h, agent) = harness([Links.wwan, Links.wlan])
        let app = h.connect(maps)
        _ = h.request(app, "QUERY")
        // Wi-Fi is usable: nothing to ask while maps may use it.
        XCTAssertEqual(h.takeEvents(agent, named: "prompt"), [])
        h.setLinks([Links.wwan])
        _ = h.request(app, "QUERY")
        let labels = h.takeEvents(agent, named: "prompt").first?["choices"]?.arrayValue?.map { $0["label"] }
        XCTAssertEqual(labels, ["Allow", "Wi-Fi only", "Allow once"])
        let denied = h.request(agent, "ANSWER 1 deny --everyone")
        XCTAssertEqual(denied["answered"]?["decision"], "deny")
        XCTAssertEqual(denied["denied_kinds"], .array(["wwan", "metered"]))
        XCTAssertEqual(h.persisted.last?.decision("maps", .metered)?.0, .deny)
        XCTAssertEqual(h.request(h.connect(), "FORGET maps")["forgotten"], true)
        _ = h.request(app, "QUERY")
        XCTAssertEqual(h.takeEvents(agent, named: "prompt").map { $0["id"] }, [2])
        let persisted = h.persisted.count
        let once = h.request(agent, "ANSWER 2 ONCE --everyone")
        XCTAssertEqual(once["answered"]?["once"], true)
        XCTAssertEqual(once["sources"]?["wwan"], "once")
        XCTAssertEqual(h.persisted.count, persisted, "once is not written")
        h.reload(policy: policy + "\n[App npt-changed]\nUser=9999\n")
        XCTAssertEqual(h.request(app, "QUERY")["reason"], "awaiting-decision", "once ends when the policy changes")
    }

    /// An answer after the prompt expired, was answered or is another's is refused alike, and stores nothing; a
    /// bad choice or id is a usage error.
    func testALateAnswerIsRefusedAndStoresNothing() {
        let (h, agent) = harness()
        _ = h.request(h.connect(maps), "QUERY")
        h.advance(bySeconds: 10)
        XCTAssertEqual(h.takeEvents(agent, named: "prompt-expired").map { $0["id"] }, [1])
        XCTAssertEqual(h.requestError(agent, "ANSWER 1 allow", .notFound),
                       "prompt 1 is not open: it expired, was answered or withdrawn (or is not yours to answer); nothing was stored")
        XCTAssertTrue(h.persisted.isEmpty)
        XCTAssertFalse(h.steps.contains("persist"))
        XCTAssertEqual(h.requestError(agent, "ANSWER 7 allow", .notFound).prefix(19), "prompt 7 is not ope")
        for bad in ["ANSWER 1", "ANSWER one allow", "ANSWER 1 maybe", "ANSWER 1 allow --all", "ANSWER 1 --everyone"] {
            XCTAssertEqual(h.requestError(agent, bad, .badArguments), "usage: \(Verb.answer.usage)", bad)
        }
        XCTAssertEqual(h.request(h.connect(Peers.admin), "QUERY maps")["sources"]?["wwan"], "policy")
    }

    /// An answer being written cannot be overtaken by its prompt's expiry; a failed write arms the expiry again.
    func testAnAnswerBeingWrittenIsNotOvertakenByTheExpiry() {
        let (h, agent) = harness()
        h.storeIsManual = true
        _ = h.request(h.connect(maps), "QUERY")
        _ = h.take(agent)
        h.advance(bySeconds: 5)
        _ = h.send(agent, "ANSWER 1 allow")
        h.advance(bySeconds: 30)
        XCTAssertEqual(h.takeEvents(agent, named: "prompt-expired"), [], "taken: no expiry while it is written")
        h.completeStore(error: EdgeError(.storeDecisions, errno: EIO, "EIO"))
        XCTAssertEqual(h.takeParsed(agent).first?["error"], "internal")
        XCTAssertEqual(h.request(h.connect(), "PROMPTS")["prompts"]?.arrayValue?.count, 1, "still open")
        h.advance(bySeconds: 10)
        XCTAssertEqual(h.takeEvents(agent, named: "prompt-expired").map { $0["id"] }, [1])
    }

    /// Every process that asked has exited: the prompt is withdrawn (an agent takes it off the screen); one that
    /// is still there keeps it open, and a prompt raised by a rejected packet is never withdrawn so.
    func testAPromptIsWithdrawnWhenEveryAskerHasExited() {
        let (h, agent) = harness()
        _ = h.request(h.connect(maps), "QUERY")
        _ = h.request(h.connect(makePeer(uid: 1000, exe: "/usr/bin/maps", pid: 501)), "QUERY")
        XCTAssertEqual(h.takeEvents(agent, named: "prompt").count, 1)
        XCTAssertEqual(h.watched, [500, 501])
        h.exit(pid: 500)
        XCTAssertEqual(h.takeEvents(agent), [], "501 still asks")
        h.exit(pid: 501)
        let withdrawn = h.takeEvents(agent)
        XCTAssertEqual(withdrawn.map { $0["event"] }, ["prompt-withdrawn"])
        XCTAssertEqual(withdrawn.first?["why"], "asker-exited")
        XCTAssertEqual(h.armedTimers, 0, "its expiry is cancelled")
        XCTAssertEqual(h.requestError(agent, "ANSWER 1 allow", .notFound).prefix(8), "prompt 1")
        XCTAssertTrue(h.watched.isEmpty)

        // Raised by asking, then the app's traffic is rejected too: its asker's exit no longer withdraws it.
        _ = h.request(h.connect(makePeer(uid: 1000, exe: "/usr/bin/maps", pid: 502)), "QUERY")
        h.feed(.blocked(app: "maps", kind: .metered, uid: 1000, ifindex: 4))
        h.exit(pid: 502)
        XCTAssertEqual(h.takeEvents(agent).map { $0["event"] }, ["prompt"])
        // Answered: nothing is watched any more.
        XCTAssertEqual(h.request(agent, "ANSWER 2 allow")["ok"], true)
        XCTAssertTrue(h.watched.isEmpty)
    }

    /// A process that had exited before the daemon could watch it: withdrawn at once.
    func testAnAskerGoneBeforeItIsWatched() {
        let (h, agent) = harness()
        h.exit(pid: 500)
        _ = h.request(h.connect(maps), "QUERY")
        XCTAssertEqual(h.takeEvents(agent).map { $0["event"] }, ["prompt", "prompt-withdrawn"])
        // Fuzz/engine (`0 SUBSCRIBE prompts`, a peer's exit, `1 QUERY` from it): the watch reported the exit at
        // once and is over, so no process is left watched for a prompt no one asks.
        XCTAssertTrue(h.watched.isEmpty, "watched \(h.watched) with no prompt open")
    }

    /// A rejected packet of WWAN=ask + Metered=ask out of the cellular link asks about both (the metered check comes
    /// first in the rules, so the kernel logs `metered`), on the link the packet left by.
    func testARejectedPacketAsksAboutEveryKindKeepingItOffItsLink() {
        let (h, agent) = harness([Links.wwan, makeLink(5, "wwan1", .wwan, metric: 300)])
        h.feed(.blocked(app: "maps", kind: .metered, uid: 1000, ifindex: 4))
        let p = h.takeEvents(agent, named: "prompt")
        XCTAssertEqual(p.first?["kinds"], .array(["wwan", "metered"]))
        XCTAssertEqual(p.first?["link"]?["name"], "wwan0", "the packet's own link, not the best")
        XCTAssertEqual(p.first?["uid"], 1000)
        XCTAssertEqual(p.first?["source"], "blocked")
        XCTAssertEqual(h.request(agent, "ANSWER 1 allow")["answered"]?["kinds"], .array(["wwan", "metered"]))
    }
}
