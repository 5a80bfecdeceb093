// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 4: change events and waiting, against the real daemon.
final class EventsWaitTests: IntegrationTestCase {
    static let policy = """
        [Defaults]
        WiFi=allow
        WWAN=deny
        Ethernet=allow
        Other=allow

        [App cellok]
        Executable=/nonexistent/cellok
        WWAN=allow

        [App cellno]
        Executable=/nonexistent/cellno

        """

    static let wifi = "wlan0/wifi/false"
    static let wwan = "wwan0/wwan/true"

    /// Both links usable, wlan0 (metric 100) preferred over wwan0 (metric 200).
    private func bothUp(_ f: AppFixture) throws {
        try f.addAddress("wlan0")
        try f.addAddress("wwan0")
        try f.addDefaultRoute("wlan0", metric: 100)
        try f.addDefaultRoute("wwan0", metric: 200)
        try waitForLinks(f.socket, "wlan0 and wwan0 usable") {
            $0[name: "wlan0"]?.usable == true && $0[name: "wwan0"]?.usable == true
        }
    }

    /// A subscriber sees the acknowledgement, the snapshot, then exactly the link and app events each change
    /// causes (and the policy event of a reload), with seq counting up by one.
    func testSubscriberSeesExactlyTheEventsOfEachChange() throws {
        let f = try makeAppFixture(policy: Self.policy, peersApart: true)
        try bothUp(f)

        let sub = try EvSubscriber(EvChannel.connect(f.socket, name: "subscriber"))
        XCTAssertEqual(sub.ack["subscribed"] as? [String], ["links", "apps", "policy"], "\(sub.ack)")
        XCTAssertEqual(try JSONValue.bool(sub.ack, "privileged"), true, "\(sub.ack)")
        let me = try JSONValue.string(sub.ack, "app")
        XCTAssertFalse(["cellok", "cellno"].contains(me), "the test process is no app of the policy: \(me)")

        // The snapshot: every link, every app a privileged subscriber may see (its own included), the policy.
        XCTAssertEqual(try JSONValue.int(sub.snapshot, "seq"), 1)
        let links = try (sub.snapshot["links"] as? [[String: Any]] ?? []).map(DaemonLink.init)
        XCTAssertEqual(links.map(\.name).sorted(), ["lo", "wlan0", "wwan0"], "the peers live in another namespace")
        XCTAssertEqual(links[name: "wlan0"]?.usable, true)
        XCTAssertEqual(links[name: "wwan0"]?.usable, true)
        let apps = sub.snapshot["apps"] as? [[String: Any]] ?? []
        var snapshotVerdicts: [String: VerdictView] = [:]
        for a in apps {
            XCTAssertNil(a["matched_by"], "snapshot apps carry no matched_by: \(a)")
            if let v = VerdictView(a) { snapshotVerdicts[v.app] = v }
        }
        XCTAssertEqual(Set(snapshotVerdicts.keys), ["cellok", "cellno", me], "\(apps)")
        XCTAssertEqual(snapshotVerdicts["cellok"]?.matches(available: true, reason: "ok", via: Self.wifi, denied: [],
                                                           pending: []), true, "\(apps)")
        for app in ["cellno", me] {
            XCTAssertEqual(snapshotVerdicts[app]?.matches(available: true, reason: "ok", via: Self.wifi, denied: ["wwan"],
                                                          pending: []), true, "\(app): \(apps)")
        }
        let policy = try XCTUnwrap(sub.snapshot["policy"] as? [String: Any], "\(sub.snapshot)")
        XCTAssertEqual(try JSONValue.int(policy, "generation"), 1)
        XCTAssertEqual(try JSONValue.int(policy, "apps"), 2)
        try sub.expectNothingMore("right after the snapshot")

        var expectedEvents = 0
        func step(_ name: String, _ change: () throws -> Void, _ expected: [EvExpectation]) throws {
            try change()
            try sub.expect(name, expected)
            try sub.expectNothingMore("after \(name)")
            expectedEvents += expected.count
            XCTAssertEqual(sub.lastSeq, 1 + expectedEvents, "seq after \(name)")
        }
        let denyingApps = ["cellno", me]

        // The kernel keeps routing by wlan0 without carrier (a linkdown route is still chosen): cellok's traffic
        // goes nowhere, and it could only bind to wwan0.
        try step("wifi peer down", { try f.setPeer(of: "wlan0", up: false) },
                 [.link("wlan0", "no carrier, not usable") { !$0.carrier && !$0.usable && $0.adminUp && $0.metric == 100 },
                  .app("cellok", available: false, reason: "routed-elsewhere", bindTo: "wwan0")]
                 + denyingApps.map { .app($0, available: false, reason: "denied", denied: ["wwan"]) })

        try step("wifi peer up", { try f.setPeer(of: "wlan0", up: true) },
                 [.link("wlan0", "carrier, usable") { $0.carrier && $0.usable && $0.operstate == "up" },
                  .app("cellok", available: true, reason: "ok", via: Self.wifi)]
                 + denyingApps.map { .app($0, available: true, reason: "ok", via: Self.wifi, denied: ["wwan"]) })

        // Only the apps that were told wwan is denied hear about it going; cellok's verdict is unchanged.
        try step("wwan route removed", { try f.deleteDefaultRoute("wwan0", metric: 200) },
                 [.link("wwan0", "no default route") { !$0.usable && $0.metric == nil && !$0.defaultRouteV4 }]
                 + denyingApps.map { .app($0, available: true, reason: "ok", via: Self.wifi) })

        try step("wwan route added", { try f.addDefaultRoute("wwan0", metric: 200) },
                 [.link("wwan0", "default route, metric 200") { $0.usable && $0.metric == 200 && $0.defaultRouteV4 }]
                 + denyingApps.map { .app($0, available: true, reason: "ok", via: Self.wifi, denied: ["wwan"]) })

        try step("wifi route removed", { try f.deleteDefaultRoute("wlan0", metric: 100) },
                 [.link("wlan0", "no default route") { !$0.usable && $0.metric == nil },
                  .app("cellok", available: true, reason: "ok", via: Self.wwan)]
                 + denyingApps.map { .app($0, available: false, reason: "denied", denied: ["wwan"]) })

        // wlan0 comes back behind wwan0 (metric 300): cellok keeps going through wwan0, so no event for it; the
        // others' traffic would too, so they are not ok: they could bind to wlan0.
        try step("wifi route added with metric 300", { try f.addDefaultRoute("wlan0", metric: 300) },
                 [.link("wlan0", "default route, metric 300") { $0.usable && $0.metric == 300 }]
                 + denyingApps.map { .app($0, available: false, reason: "routed-elsewhere", denied: ["wwan"], bindTo: "wlan0") })

        // A reload that changes one app: the policy event and that app's event, nothing else.
        try step("policy edit", {
            _ = try writeConfig(IntegrationTestCase.standardConfig + "\n"
                + Self.policy.replacingOccurrences(of: "WWAN=allow", with: "WWAN=deny"), in: f.dir)
        }, [EvExpectation(description: "policy generation 2, 2 apps, no error") { e in
                e["event"] as? String == "policy" && (try? JSONValue.int(e, "generation")) == 2
                    && (try? JSONValue.int(e, "apps")) == 2 && e["error"] is NSNull
            },
            .app("cellok", available: false, reason: "routed-elsewhere", denied: ["wwan"], bindTo: "wlan0")])

        XCTAssertEqual(sub.lastSeq, 1 + expectedEvents)
        XCTAssertEqual(sub.events.count, sub.lastSeq, "every event was counted once")
    }

    /// An unprivileged subscriber hears about links and its own app only; a privileged one about every app.
    func testUnprivilegedSubscriberSeesOnlyItsOwnApp() throws {
        let bins = try makeTempDir()
        guard chmod(bins, 0o755) == 0 else { throw HarnessError("chmod \(bins) failed") }
        let mysocat = try copyExecutable("/usr/bin/socat", to: bins, as: "mine-socat")
        let f = try makeAppFixture(policy: Self.policy + "\n[App mine]\nExecutable=\(mysocat)\nWWAN=allow\n",
                                   peersApart: true)
        try f.addAddress("wlan0")
        try f.addAddress("wwan0")
        try f.addDefaultRoute("wwan0", metric: 200)
        try waitForLinks(f.socket, "wwan0 usable") { $0[name: "wwan0"]?.usable == true }

        let nobody = try EvPipedCommand(Self.asNobody + [mysocat, "-", "UNIX-CONNECT:\(f.socket)"],
                                        stderrPath: "\(f.dir)/socat-nobody.log", name: "nobody's socat")
        addTeardownBlock { nobody.stop() }
        let unprivileged = try EvSubscriber(nobody.channel)
        XCTAssertEqual(try JSONValue.bool(unprivileged.ack, "privileged"), false, "\(unprivileged.ack)")
        XCTAssertEqual(unprivileged.ack["app"] as? String, "mine", "\(unprivileged.ack)")
        let seen = (unprivileged.snapshot["apps"] as? [[String: Any]] ?? []).compactMap { $0["app"] as? String }
        XCTAssertEqual(seen, ["mine"], "an unprivileged snapshot holds its own app only")
        XCTAssertNotNil(unprivileged.snapshot["links"], "links are for everyone")

        let root = try EvSubscriber(EvChannel.connect(f.socket, name: "root subscriber"))
        let me = try JSONValue.string(root.ack, "app")
        let rootSeen = Set((root.snapshot["apps"] as? [[String: Any]] ?? []).compactMap { $0["app"] as? String })
        XCTAssertEqual(rootSeen, ["cellok", "cellno", "mine", me])

        try f.addDefaultRoute("wlan0", metric: 100)
        let wlanUsable = EvExpectation.link("wlan0", "usable") { $0.usable && $0.metric == 100 }
        try unprivileged.expect("wlan0 usable, as nobody", [wlanUsable, .app("mine", available: true, reason: "ok", via: Self.wifi)])
        try root.expect("wlan0 usable, as root", [
            wlanUsable,
            .app("mine", available: true, reason: "ok", via: Self.wifi),
            .app("cellok", available: true, reason: "ok", via: Self.wifi),
            .app("cellno", available: true, reason: "ok", via: Self.wifi, denied: ["wwan"]),
            .app(me, available: true, reason: "ok", via: Self.wifi, denied: ["wwan"]),
        ])
        try unprivileged.expectNothingMore("after wlan0 became usable, as nobody")
        try root.expectNothingMore("after wlan0 became usable, as root")

        // Without carrier, wlan0's route is still the kernel's choice: traffic goes nowhere, and apps allowed on
        // cellular could only bind to wwan0.
        try f.setPeer(of: "wlan0", up: false)
        let wlanGone = EvExpectation.link("wlan0", "no carrier") { !$0.carrier && !$0.usable }
        let mineRouted = EvExpectation.app("mine", available: false, reason: "routed-elsewhere", bindTo: "wwan0")
        try unprivileged.expect("wlan0 lost carrier, as nobody", [wlanGone, mineRouted])
        try root.expect("wlan0 lost carrier, as root", [
            wlanGone,
            mineRouted,
            .app("cellok", available: false, reason: "routed-elsewhere", bindTo: "wwan0"),
            .app("cellno", available: false, reason: "denied", denied: ["wwan"]),
            .app(me, available: false, reason: "denied", denied: ["wwan"]),
        ])
        try unprivileged.expectNothingMore("after wlan0 lost carrier, as nobody")
        try root.expectNothingMore("after wlan0 lost carrier, as root")
        XCTAssertEqual(unprivileged.lastSeq, 5)
        XCTAssertEqual(root.lastSeq, 11)
    }

    // MARK: - Many subscribers

    /// Reads the next line of every channel at once (poll over all of them), within `timeout` seconds.
    private func nextLineOfEach(_ channels: [EvChannel], _ what: String, timeout: Double = 10) throws -> [String] {
        var lines = [String?](repeating: nil, count: channels.count)
        var pending = Array(channels.indices)
        let deadline = monotonicNow() + timeout
        while true {
            pending = pending.filter { i in
                if let l = channels[i].bufferedLine() { lines[i] = l; return false }
                return true
            }
            if pending.isEmpty { break }
            let remaining = deadline - monotonicNow()
            guard remaining > 0 else {
                throw HarnessError("\(pending.count) of \(channels.count) subscribers got no \(what) within \(timeout) s")
            }
            var pfds = pending.map { pollfd(fd: channels[$0].readFD, events: Int16(POLLIN), revents: 0) }
            _ = poll(&pfds, nfds_t(pfds.count), Int32(min(remaining, 1) * 1000) + 1)
            for (k, p) in pfds.enumerated() where p.revents != 0 {
                let ch = channels[pending[k]]
                try ch.readAvailable()
                if ch.eof && !ch.hasDataWaiting() {
                    throw HarnessError("subscriber \(pending[k]) was disconnected while waiting for \(what)")
                }
            }
        }
        return lines.map { $0! }
    }

    /// 1,000 subscribers at once, on a daemon with the soft descriptor limit a service gets by default (1024):
    /// each gets its acknowledgement and snapshot, then every one the next link event, and nothing else.
    func testAThousandSubscribersAllGetTheNextEvent() throws {
        let count = 1000
        var original = rlimit()
        guard getrlimit(RLIMIT_NOFILE_, &original) == 0 else { throw HarnessError("getrlimit failed") }
        addTeardownBlock { var o = original; _ = setrlimit(RLIMIT_NOFILE_, &o) }
        // The daemon inherits the limit in force when it starts: systemd's default soft limit, not the runner's.
        var forDaemon = original
        forDaemon.rlim_cur = min(1024, original.rlim_max)
        guard setrlimit(RLIMIT_NOFILE_, &forDaemon) == 0 else { throw HarnessError("setrlimit(1024) failed") }
        let f: AppFixture
        do {
            f = try makeAppFixture(policy: Self.policy, peersApart: true)
        } catch {
            _ = setrlimit(RLIMIT_NOFILE_, &original)
            throw error
        }
        // The test process needs a descriptor per subscriber, and then some.
        var forUs = original
        forUs.rlim_cur = max(original.rlim_cur, min(original.rlim_max, 4096))
        guard setrlimit(RLIMIT_NOFILE_, &forUs) == 0, forUs.rlim_cur >= rlim_t(count + 100) else {
            throw HarnessError("cannot raise RLIMIT_NOFILE to \(count + 100) (hard limit \(original.rlim_max))")
        }
        try f.addAddress("wlan0")

        var channels: [EvChannel] = []
        addTeardownBlock { for c in channels { c.close() } }
        for i in 0..<count {
            channels.append(try EvChannel.connect(f.socket, name: "subscriber \(i)"))
        }
        for c in channels { try c.send("SUBSCRIBE links\n") }
        let acks: [String]
        do {
            acks = try nextLineOfEach(channels, "acknowledgement")
        } catch {
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(f.daemon.pid)/fd").count) ?? -1
            throw HarnessError("\(error) (the daemon holds \(fds) descriptors, i.e. has accepted about \(fds - 12) of "
                + "the \(count) connections)")
        }
        for (i, line) in acks.enumerated() {
            let o = try JSONValue.object(line)
            guard try JSONValue.bool(o, "ok"), o["subscribed"] as? [String] == ["links"] else {
                XCTFail("subscriber \(i): bad acknowledgement \(line)")
                return
            }
        }
        let snapshots = try nextLineOfEach(channels, "snapshot")
        for (i, line) in snapshots.enumerated() {
            let o = try JSONValue.object(line)
            guard o["event"] as? String == "snapshot", try JSONValue.int(o, "seq") == 1, o["links"] != nil,
                  o["apps"] == nil, o["policy"] == nil else {
                XCTFail("subscriber \(i): bad snapshot \(line.prefix(300))")
                return
            }
        }
        let daemonFDs = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(f.daemon.pid)/fd").count) ?? -1
        XCTAssertGreaterThan(daemonFDs, count, "the daemon holds a descriptor per subscriber")

        let start = monotonicNow()
        try f.addDefaultRoute("wlan0", metric: 100)
        let events = try nextLineOfEach(channels, "link event after the route was added")
        let spread = monotonicNow() - start
        for (i, line) in events.enumerated() {
            let o = try JSONValue.object(line)
            let link = (o["link"] as? [String: Any]).flatMap { try? DaemonLink($0) }
            guard o["event"] as? String == "link", (try? JSONValue.int(o, "seq")) == 2, link?.name == "wlan0",
                  link?.usable == true, link?.metric == 100 else {
                XCTFail("subscriber \(i): expected the wlan0 link event with seq 2, got \(line.prefix(400))")
                return
            }
        }
        // Nothing else is queued for anyone.
        for c in channels { try c.send("PING\n") }
        let pongs = try nextLineOfEach(channels, "pong")
        XCTAssertEqual(pongs.filter { $0 == #"{"ok":true,"pong":true}"# }.count, count,
                       "first line that is not a pong: \(pongs.first { $0 != #"{"ok":true,"pong":true}"# } ?? "-")")
        XCTAssertLessThan(spread, 10, "all \(count) subscribers got the event")
        XCTAssertTrue(f.daemon.isRunning)
        XCTAssertEqual(try request(f.socket, "PING")["pong"] as? Bool, true, "the daemon still serves new clients")
    }

    // MARK: - A subscriber that does not read

    /// A subscriber that never reads loses its events once it falls 1 MiB behind and is disconnected when it has
    /// not caught up within --subscriber-timeout, after a last overflow line, while another subscriber keeps
    /// getting every event and a client keeps getting answers.
    func testASubscriberThatNeverReadsIsDisconnected() throws {
        // 300 apps that all change together when wlan0 comes and goes: each flip is ~100 KB of app events.
        let appCount = 300
        let apps = (1...appCount).map { "[App app\($0)]\nExecutable=/nonexistent/app\($0)\n" }.joined(separator: "\n")
        let f = try makeAppFixture(policy: "[Defaults]\nWWAN=deny\n\n" + apps, peersApart: true,
                                   extraArgs: ["--subscriber-timeout", "1"])
        try bothUp(f)

        let stalled = try EvChannel.connect(f.socket, name: "stalled subscriber")
        try stalled.send("SUBSCRIBE\n")
        let reader = try EvSubscriber(EvChannel.connect(f.socket, name: "reading subscriber"))
        let client = try EvChannel.connect(f.socket, name: "querying client")
        XCTAssertEqual(try client.request("PING")["pong"] as? Bool, true)

        /// Waits until the daemon's verdict for app1 says wlan0 is `up` (asking on the querying client, whose
        /// every answer must come at once), then reads the reading subscriber's events up to a PING's reply.
        func settle(up: Bool, _ round: Int) throws {
            try waitUntil("round \(round): app1 \(up ? "available" : "denied")", timeout: 5) {
                let t = monotonicNow()
                let reply = try client.request("QUERY app1", timeout: 2)
                let took = monotonicNow() - t
                XCTAssertLessThan(took, 1, "round \(round): QUERY took \(took) s")
                return (VerdictView(reply)?.available == up, "\(reply)")
            }
            try reader.channel.send("PING\n")
            while case .event = try reader.next(timeout: 5) {}
        }

        var round = 0
        let maxRounds = 80
        while !stalled.peerHasClosed() && round < maxRounds {
            round += 1
            // Five toggles per batch, ending down on odd rounds and up on even ones.
            let end = round % 2 == 0 ? "up" : "down"
            let other = end == "up" ? "down" : "up"
            try f.peers.batch([end, other, end, other, end].map { "link set wlan0p \($0)" }, scratchDir: f.dir)
            try settle(up: end == "up", round)
        }
        XCTAssertTrue(stalled.peerHasClosed(), "the stalled subscriber is still connected after \(round) rounds "
            + "(\(reader.lastSeq) events to the reading one)")
        XCTAssertTrue(f.daemon.log.contains("behind: disconnecting it"), "the daemon says why")

        // What the stalled subscriber got before it was dropped is well-formed: the acknowledgement, the
        // snapshot, consecutive events, the overflow line, then the end of the stream.
        var lines: [String] = []
        while let line = try stalled.readLine(timeout: 5) { lines.append(line) }
        XCTAssertTrue(stalled.eof, "end of stream after the last line")
        XCTAssertGreaterThanOrEqual(lines.count, 2, "\(lines.prefix(3))")
        guard lines.count >= 2 else { return }
        XCTAssertEqual(try JSONValue.bool(JSONValue.object(lines[0]), "ok"), true, lines[0].prefix(300) + "")
        var expectedSeq = 1
        var sawOverflow = false
        for (i, line) in lines.dropFirst().enumerated() {
            let o = try JSONValue.object(line)
            if o["event"] as? String == "overflow" {
                XCTAssertEqual(i, lines.count - 2, "the overflow line is the last one")
                XCTAssertNil(o["seq"], "\(o)")
                sawOverflow = true
                continue
            }
            XCTAssertEqual(try JSONValue.int(o, "seq"), expectedSeq, "stalled subscriber's line \(i + 1)")
            expectedSeq += 1
        }
        XCTAssertGreaterThanOrEqual(expectedSeq, 2, "it got the snapshot, and perhaps events, before it stalled")
        XCTAssertTrue(sawOverflow, "the overflow line came last (half its socket buffer is kept for it)")
        XCTAssertLessThan(expectedSeq - 1, reader.lastSeq, "it was dropped while the reading subscriber went on")
        let leftover = String(decoding: stalled.partial, as: UTF8.self)
        XCTAssertTrue(stalled.partial.isEmpty, "the stream ends on a line boundary; \(stalled.partial.count) bytes of a "
            + "cut-off line at the end (overflow line seen: \(sawOverflow)): \(leftover.prefix(200))…")

        // The reading subscriber and the client carry on: one more flip, seen in full.
        let upNow = round % 2 == 0
        let seqBefore = reader.lastSeq
        try f.setPeer(of: "wlan0", up: !upNow)
        try settle(up: !upNow, round + 1)
        var lastVerdicts: [String: Bool] = [:]
        for e in reader.events.suffix(reader.lastSeq - seqBefore) where e["event"] as? String == "app" {
            if let v = VerdictView(e) { lastVerdicts[v.app] = v.available }
        }
        XCTAssertEqual(lastVerdicts.count, appCount + 1, "every app (and the test's own) changed once more")
        XCTAssertEqual(lastVerdicts.values.filter { $0 == !upNow }.count, appCount + 1,
                       "and each one's last event says available \(!upNow)")
        XCTAssertEqual(reader.events.count, reader.lastSeq, "no event was missed or repeated")
        XCTAssertEqual(VerdictView(try client.request("QUERY app1"))?.available, !upNow)
        XCTAssertTrue(f.daemon.isRunning)
    }

    /// A subscriber that reads, but too slowly, loses the events it had not read once it falls 1 MiB behind; once
    /// it has read everything it gets a `resync` with how many were dropped and the whole state, which is the
    /// daemon's, and the stream goes on.
    func testASlowSubscriberIsResyncedOnceItCatchesUp() throws {
        let appCount = 300
        let apps = (1...appCount).map { "[App app\($0)]\nExecutable=/nonexistent/app\($0)\n" }.joined(separator: "\n")
        let f = try makeAppFixture(policy: "[Defaults]\nWWAN=deny\n\n" + apps, peersApart: true)
        try bothUp(f)
        let slow = try EvChannel.connect(f.socket, name: "slow subscriber")
        try slow.send("SUBSCRIBE apps\n")
        let client = try EvChannel.connect(f.socket, name: "querying client")
        // Flip wlan0 until the daemon says it dropped the slow one's backlog (each flip ~100 KB of events).
        var round = 0
        while !f.daemon.log.contains("dropped") && round < 60 {
            round += 1
            let up = round % 2 == 0
            try f.setPeer(of: "wlan0", up: up)
            try waitUntil("round \(round): app1 \(up ? "available" : "denied")", timeout: 5) {
                let reply = try client.request("QUERY app1", timeout: 2)
                return (VerdictView(reply)?.available == up, "\(reply)")
            }
        }
        XCTAssertTrue(f.daemon.log.contains("fell more than"), "fell behind after \(round) rounds")
        // Now it reads: whole lines, seq consecutive up to a gap, then the resync.
        var lines: [[String: Any]] = []
        var resync: [String: Any]?
        while resync == nil, let line = try slow.readLine(timeout: 5) {
            let o = try JSONValue.object(line)
            lines.append(o)
            if o["event"] as? String == "resync" { resync = o }
        }
        let r = try XCTUnwrap(resync, "no resync among \(lines.count) lines")
        XCTAssertEqual(r["why"] as? String, "fell-behind")
        let dropped = try JSONValue.int(r, "dropped")
        XCTAssertGreaterThan(dropped, 0)
        let seqs = lines.dropFirst().compactMap { $0["seq"] as? Int }
        XCTAssertEqual(seqs.first, 1, "the snapshot")
        let beforeGap = Array(seqs.dropLast())
        XCTAssertEqual(beforeGap, Array(1..<(beforeGap.count + 1)), "consecutive until the gap")
        XCTAssertEqual(seqs.last, (seqs.dropLast().last ?? 0) + dropped + 1, "the gap is what was dropped")
        // Its state is the daemon's now.
        let upNow = round % 2 == 0
        let resyncApps = try XCTUnwrap(r["apps"] as? [[String: Any]])
        XCTAssertEqual(resyncApps.count, appCount + 1)
        XCTAssertTrue(resyncApps.allSatisfy { VerdictView($0)?.available == upNow }, "every app as it is now")
        // The stream goes on.
        try f.setPeer(of: "wlan0", up: !upNow)
        let next = try JSONValue.object(XCTUnwrap(try slow.readLine(timeout: 5)))
        XCTAssertEqual(next["event"] as? String, "app")
        XCTAssertEqual(next["seq"] as? Int, (seqs.last ?? 0) + 1)
        XCTAssertFalse(slow.peerHasClosed())
    }

    // MARK: - Waiting

    static let updaterPolicy = "[Defaults]\nWWAN=deny\n\n[App updater]\nExecutable=/nonexistent/updater\nWWAN=deny\n"

    /// Only wwan0 is usable, so the updater (WWAN=deny) has to wait; wlan0 has its address but no route yet.
    private func wwanOnly() throws -> AppFixture {
        let f = try makeAppFixture(policy: Self.updaterPolicy)
        try f.addAddress("wlan0")
        try f.addAddress("wwan0")
        try f.addDefaultRoute("wwan0", metric: 200)
        try waitForVerdict(f.socket, "updater", "denied on wwan") { $0.reason == "denied" && $0.denied == ["wwan"] }
        return f
    }

    func testWaitReturnsWhenALinkTheAppMayUseComesUp() throws {
        let f = try wwanOnly()
        let waiter = try EvChannel.connect(f.socket, name: "waiter")
        // The PING before the WAIT is answered in the same pass, so once its pong is here the WAIT is held;
        // the PING after it must wait for the WAIT's reply.
        try waiter.send("PING\nWAIT updater 10\nPING\n")
        XCTAssertEqual(try waiter.readLine(timeout: 5), #"{"ok":true,"pong":true}"#)
        XCTAssertEqual(try queryVerdict(f.socket, "updater").0.reason, "denied", "still denied")
        XCTAssertFalse(waiter.hasDataWaiting(), "WAIT answered while the updater may not use the network: "
            + "\((try? waiter.readLine(timeout: 0.1)).flatMap { $0 } ?? "")")

        let changedAt = monotonicNow()
        try f.addDefaultRoute("wlan0", metric: 100)
        let reply = try waiter.readObject(timeout: 5)
        let tookAfterChange = monotonicNow() - changedAt
        XCTAssertEqual(try JSONValue.bool(reply, "ok"), true, "\(reply)")
        XCTAssertEqual(reply["app"] as? String, "updater", "\(reply)")
        XCTAssertEqual(reply["matched_by"] as? String, "name", "\(reply)")
        let v = try XCTUnwrap(VerdictView(reply), "\(reply)")
        XCTAssertTrue(v.matches(available: true, reason: "ok", via: "wlan0/wifi/false", denied: ["wwan"], pending: []), "\(v)")
        XCTAssertLessThan(tookAfterChange, 5)
        XCTAssertEqual(try waiter.readLine(timeout: 5), #"{"ok":true,"pong":true}"#, "the pipelined PING comes after")

        // Already available: WAIT answers at once.
        let t = monotonicNow()
        let at = try waiter.request("WAIT updater 10")
        XCTAssertEqual(VerdictView(at)?.reason, "ok", "\(at)")
        XCTAssertLessThan(monotonicNow() - t, 2, "WAIT on an available app answers at once")
    }

    func testWaitTimesOutWithTheReason() throws {
        let f = try wwanOnly()
        let waiter = try EvChannel.connect(f.socket, name: "waiter")
        let t = monotonicNow()
        let reply = try waiter.request("WAIT updater 0.5", timeout: 5)
        let took = monotonicNow() - t
        XCTAssertGreaterThanOrEqual(took, 0.45, "WAIT 0.5 answered after \(took) s")
        XCTAssertLessThan(took, 3, "WAIT 0.5 answered after \(took) s")
        XCTAssertEqual(try JSONValue.bool(reply, "ok"), false, "\(reply)")
        XCTAssertEqual(reply["error"] as? String, "timeout", "\(reply)")
        XCTAssertEqual(reply["app"] as? String, "updater", "\(reply)")
        XCTAssertEqual(reply["message"] as? String, "updater may not use wwan: its policy denies it", "the verdict's own why: \(reply)")
        let v = try XCTUnwrap(VerdictView(reply), "the time-out carries the verdict that held: \(reply)")
        XCTAssertTrue(v.matches(available: false, reason: "denied", via: nil, denied: ["wwan"], pending: []), "\(v)")
        XCTAssertEqual(try waiter.request("PING")["pong"] as? Bool, true, "the connection lives on")

        // A lone number is the caller's own time-out: socat falls to [Defaults] (WWAN=deny) too.
        let own = try request(f.socket, "WAIT 0.2")
        XCTAssertEqual(own["error"] as? String, "timeout", "\(own)")
        XCTAssertEqual(own["app"] as? String, "socat", "\(own)")
        XCTAssertEqual(VerdictView(own)?.reason, "denied", "\(own)")

        // With nothing usable at all the reason says so.
        try f.deleteDefaultRoute("wwan0", metric: 200)
        try waitForVerdict(f.socket, "updater", "no network") { $0.reason == "no-network" }
        let none = try request(f.socket, "WAIT updater 0.2")
        XCTAssertEqual(none["error"] as? String, "timeout", "\(none)")
        XCTAssertTrue(VerdictView(none)?.matches(available: false, reason: "no-network", via: nil, denied: [], pending: [])
            == true, "\(none)")
    }

    /// `netpermctl wait -- COMMAND` runs the command only once the app may use the network.
    func testNetpermctlWaitRunsTheCommandOnceAllowed() throws {
        let f = try wwanOnly()
        let marker = "\(f.dir)/ran"
        let log = "\(f.dir)/netpermctl-wait.log"
        let wait = try Subprocess.spawn([netpermctl, "--socket", f.socket, "wait", "--app", "updater", "--timeout", "10",
                                         "--", "sh", "-c", "echo ran > \(marker)"],
                                        stdin: .devNull, stdout: .appendFile(log), stderr: .appendFile(log))
        addTeardownBlock { wait.killAndReap() }
        // Once it holds a connection to the daemon it has asked (or is about to).
        try waitUntil("netpermctl wait is connected to the daemon", timeout: 5) {
            if let status = wait.poll() {
                throw HarnessError("netpermctl wait exited \(status) while the updater was denied: "
                    + ((try? String(contentsOfFile: log, encoding: .utf8)) ?? ""))
            }
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(wait.pid)/fd")) ?? []
            let sockets = fds.filter {
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(wait.pid)/fd/\($0)"))?
                    .hasPrefix("socket:") == true
            }
            return (!sockets.isEmpty, "descriptors: \(fds)")
        }
        XCTAssertTrue(wait.isRunning, "netpermctl wait is still waiting")
        XCTAssertFalse(FileManager.default.fileExists(atPath: marker), "the command ran while the updater was denied")

        try f.addDefaultRoute("wlan0", metric: 100)
        let status = wait.wait(timeout: 10)
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        XCTAssertEqual(status, 0, "netpermctl wait: \(output)")
        XCTAssertEqual(try? String(contentsOfFile: marker, encoding: .utf8), "ran\n", "the command ran once allowed")
    }

    /// The longest time-out netpermctl accepts is one the daemon accepts: `99999999.9995` used to be rounded up to
    /// the millisecond, sent as `100000000.000`, refused by the daemon, and wait exited 1. One past the daemon's
    /// limit is a usage error before anything is sent, as WAIT would refuse it.
    func testNetpermctlWaitTakesEveryTimeOutTheDaemonTakes() throws {
        let f = try wwanOnly()
        try f.addDefaultRoute("wlan0", metric: 100)
        try waitForVerdict(f.socket, "updater", "updater available over wlan0") { $0.available }
        for timeout in ["99999999.9995", "99999999.999999", "99999999.9999999", "0.0000001"] {
            let r = try ctl(["--socket", f.socket, "wait", "--app", "updater", "--timeout", timeout])
            XCTAssertEqual(r.status, 0, "--timeout \(timeout): \(r.summary)")
        }
        XCTAssertEqual(try request(f.socket, "WAIT updater 100000000")["error"] as? String, "bad-arguments")
        let over = try ctl(["--socket", f.socket, "wait", "--app", "updater", "--timeout", "100000000"])
        XCTAssertEqual(over.status, 2, over.summary)
    }

    func testNetpermctlWaitTimesOutWithExitFour() throws {
        let f = try wwanOnly()
        let marker = "\(f.dir)/ran"
        let own = try ctl(["--socket", f.socket, "wait", "--timeout", "0.3", "--", "sh", "-c", "echo ran > \(marker)"])
        XCTAssertEqual(own.status, 4, own.summary)
        XCTAssertEqual(own.stderr, "netpermctl: timed out: netpermctl may not use the network: denied on wwan\n", own.summary)
        XCTAssertFalse(FileManager.default.fileExists(atPath: marker), "the command must not run after a time-out")

        let named = try ctl(["--socket", f.socket, "wait", "--app", "updater", "--timeout", "0.3"])
        XCTAssertEqual(named.status, 4, named.summary)
        XCTAssertEqual(named.stderr, "netpermctl: timed out: updater may not use the network: denied on wwan\n",
                       named.summary)
        XCTAssertEqual(named.stdout, "", named.summary)
    }
}

/// RLIMIT_NOFILE as setrlimit takes it.
private let RLIMIT_NOFILE_ = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
