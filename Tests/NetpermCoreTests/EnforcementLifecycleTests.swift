// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
import XCTest

/// Enforcement's lifecycle (EnforcementLifecycle.swift): one value with one setter, which logs every move old -> new;
/// each path the rules take (first load, a change of what differs, its refusal and the repair, failures retried
/// and given up, Mode=off's removal and its failure) is the sequence of moves it should be.
final class EnforcementLifecycleTests: XCTestCase {
    private let policy = "[Enforcement]\nMode=block\n[App phone]\nUser=1000\nWWAN=ask\n"

    /// The moves the engine logged since `from` (its log's index), as "old -> new".
    private func moves(_ h: EngineHarness, from: Int = 0) -> [String] {
        h.log.dropFirst(from).map(\.1).filter { $0.hasPrefix("enforcement: ") && $0.contains(" -> ") }
            .map { String($0.dropFirst("enforcement: ".count)) }
    }

    func testTheSetterLogsEachMoveOnceAndHandsBackALeftRetry() {
        var l = EnforcementLifecycle()
        var lines: [String] = []
        XCTAssertNil(l.set(.off) { lines.append($0) })
        XCTAssertEqual(lines, [], "no move, no line")
        XCTAssertNil(l.set(.loading(failures: 0)) { lines.append($0) })
        XCTAssertNil(l.set(.failed(EdgeError(.loadRules, "refused"), failures: 1, retry: 7)) { lines.append($0) })
        XCTAssertEqual(l.set(.loading(failures: 1)) { lines.append($0) }, 7, "the retry of the failed phase left")
        XCTAssertEqual(lines, ["enforcement: off -> loading", "enforcement: loading -> failed (1 attempt)",
                               "enforcement: failed (1 attempt) -> loading (attempt 2)"])
        XCTAssertEqual(l.phase, .loading(failures: 1))
    }

    /// What STATUS and the verdicts say of each phase: the rules in force stay `enforcing` while they change.
    func testWhatEachPhaseShows() {
        let shown: [(EnforcementPhase, EnforcementState)] = [
            (.off, .off), (.removing(failures: 0), .off), (.loading(failures: 2), .applying), (.enforcing, .enforcing),
            (.changing(partial: true), .enforcing), (.changing(partial: false), .enforcing), (.repairing, .enforcing),
            (.failed(EdgeError(.loadRules, "e"), failures: 3, retry: nil), .failed(EdgeError(.loadRules, "e"), attempts: 3)),
        ]
        for (phase, state) in shown { XCTAssertEqual(phase.shown, state, phase.name) }
    }

    func testFirstLoadThenAChangeOfWhatDiffers() {
        let h = EngineHarness(policy: policy, links: [Links.lo, Links.eth])
        XCTAssertEqual(moves(h), ["off -> loading", "loading -> enforcing"])
        let mark = h.log.count
        h.setLinks([Links.lo, Links.eth, Links.wwan])
        XCTAssertEqual(h.steps.filter { $0.hasSuffix("-rules") }.last, "update-rules")
        XCTAssertEqual(moves(h, from: mark), ["enforcing -> changing (only what differs)", "changing (only what differs) -> enforcing"])
    }

    /// A refused change of what differs is repaired by the whole table at once; that one refused too is a failure,
    /// retried by its timer.
    func testARefusedChangeIsRepairedThenFails() {
        let h = EngineHarness(policy: policy, links: [Links.lo, Links.wwan])
        let mark = h.log.count
        h.rulesError = EdgeError(.loadRules, errno: ENOENT, "No such file or directory")
        XCTAssertEqual(h.request(h.connect(), "DECIDE phone wwan allow --once")["ok"], true)
        XCTAssertEqual(moves(h, from: mark), ["enforcing -> changing (only what differs)",
                                              "changing (only what differs) -> repairing (the whole table)",
                                              "repairing (the whole table) -> failed (1 attempt)"])
        XCTAssertEqual(h.request(h.connect(), "QUERY phone")["enforced_why"], "rules-failed")
        let retried = h.log.count
        h.rulesError = nil
        h.advance(byMicroseconds: 1_000_000)
        XCTAssertEqual(moves(h, from: retried), ["failed (1 attempt) -> loading (attempt 2)", "loading (attempt 2) -> enforcing"])
        XCTAssertEqual(h.request(h.connect(), "QUERY phone")["enforced"], true)
    }

    /// Refusals counted to the fifth, then given up; a change meanwhile loads afresh and its retry timer is cancelled
    /// with the phase it belonged to (no retry fires after the rules are in force).
    func testFailuresCountThenGiveUpAndANewChangeCancelsTheRetry() {
        let h = EngineHarness(policy: policy, links: [Links.lo, Links.eth], started: false)
        h.rulesError = EdgeError(.loadRules, errno: EPERM, "Operation not permitted")
        h.feed(.started)
        for wait: UInt64 in [1_000_000, 2_000_000, 4_000_000, 8_000_000] { h.advance(byMicroseconds: wait) }
        XCTAssertEqual(moves(h).last, "loading (attempt 5) -> failed (5 attempts, given up)")
        XCTAssertEqual(h.request(h.connect(), "STATUS")["enforcement"]?["attempts"], 5)
        h.setLinks([Links.lo, Links.eth, Links.wwan])
        XCTAssertEqual(moves(h).last, "loading -> failed (1 attempt)", "a change starts the count again")
        guard let retry = h.steps.last(where: { $0.hasPrefix("arm ") && $0.hasSuffix(" 1000000") })?.split(separator: " ")[1]
        else { return XCTFail("no retry armed: \(h.steps)") }
        let loads = h.rules.count, mark = h.log.count
        h.rulesError = nil
        h.setLinks([Links.lo, Links.eth])
        XCTAssertEqual(moves(h, from: mark), ["failed (1 attempt) -> loading", "loading -> enforcing"])
        XCTAssertTrue(h.steps.contains("cancel \(retry)"), "the retry of the failed phase is cancelled: \(h.steps.suffix(20))")
        h.advance(byMicroseconds: 60_000_000)
        XCTAssertEqual(h.rules.count, loads + 1, "no retry after the rules took")
    }

    /// The engine gets the kernel's errno, not only its words: a load refused with EPERM is kept as EPERM by the
    /// failed phase (and a retry refused with EBUSY as EBUSY), while STATUS and STATUS= say the words as before.
    func testARefusalKeepsItsErrno() {
        let h = EngineHarness(policy: policy, links: [Links.lo, Links.eth], started: false)
        let refused = EdgeError(.loadRules, errno: EPERM, "Operation not permitted")
        h.rulesError = refused
        h.feed(.started)
        guard case let .failed(kept, failures, _) = h.engine.enforcement.lifecycle.phase else {
            return XCTFail("not failed: \(h.engine.enforcement.lifecycle.phase)")
        }
        XCTAssertEqual(kept.errno, EPERM)
        XCTAssertEqual(kept.operation, .loadRules)
        XCTAssertEqual(failures, 1)
        XCTAssertEqual(h.engine.enforcement.state, .failed(refused, attempts: 1))
        let status = h.request(h.connect(), "STATUS")["enforcement"]
        XCTAssertEqual(status?["error"], "Operation not permitted")
        XCTAssertEqual(status?["errno"], nil, "STATUS is as it was")
        XCTAssertEqual(h.statusTexts.last?.hasSuffix(", enforcement failed: Operation not permitted"), true, "\(h.statusTexts)")
        h.rulesError = EdgeError(.loadRules, errno: EBUSY, "Device or resource busy")
        h.advance(byMicroseconds: 1_000_000)
        guard case let .failed(again, 2, _) = h.engine.enforcement.lifecycle.phase else {
            return XCTFail("not failed twice: \(h.engine.enforcement.lifecycle.phase)")
        }
        XCTAssertEqual(again.errno, EBUSY, "EBUSY is not EPERM")
    }

    /// Mode=off at a reload removes the rules (`removing` until the kernel answers); a refused removal is a failure
    /// too, retried as a removal.
    func testModeOffRemovesAndARefusedRemovalIsRetried() {
        let h = EngineHarness(policy: policy, links: [Links.lo, Links.eth])
        var mark = h.log.count
        h.reload(policy: "[App phone]\nUser=1000\n")
        XCTAssertEqual(h.rules.last, Ruleset.removal)
        XCTAssertEqual(moves(h, from: mark), ["enforcing -> removing", "removing -> off"])
        h.reload(policy: policy)
        mark = h.log.count
        h.rulesError = EdgeError(.loadRules, errno: EPERM, "Operation not permitted")
        h.reload(policy: "[App phone]\nUser=1000\n")
        XCTAssertEqual(moves(h, from: mark), ["enforcing -> removing", "removing -> failed (1 attempt)"])
        XCTAssertEqual(h.request(h.connect(), "QUERY phone")["enforced_why"], "mode-off")
        mark = h.log.count
        h.rulesError = nil
        h.advance(byMicroseconds: 1_000_000)
        XCTAssertEqual(h.rules.last, Ruleset.removal)
        XCTAssertEqual(moves(h, from: mark), ["failed (1 attempt) -> removing (attempt 2)", "removing (attempt 2) -> off"])
    }

    /// Mode=off at start-up removes quietly (no answer comes back): `off` at once, no move logged.
    func testModeOffAtStartUpStaysOff() {
        let h = EngineHarness(policy: "[App phone]\nUser=1000\n", links: [Links.lo, Links.eth])
        XCTAssertEqual(h.rules, [Ruleset.removal])
        XCTAssertEqual(moves(h), [])
        XCTAssertEqual(h.engine.enforcement.lifecycle.phase, .off)
    }
}
