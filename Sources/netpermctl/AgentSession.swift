// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO
import NetpermProtocol

/// An agent's connection to the daemon, for the terminal agent and the notification agent alike: `SUBSCRIBE
/// prompts usage`, then the prompts as they open and close, and answers by `ANSWER ID CHOICE`, which the daemon refuses
/// once the prompt has closed (so a late answer stores nothing). A privileged agent answers for everyone, a user's
/// for their own processes.
final class AgentSession {
    enum Change {
        case opened(JSON)
        /// Closed in the daemon: `why` is the event's name (prompt-expired, prompt-answered, prompt-withdrawn) or
        /// "gone" (missing from a resync).
        case closed(id: Int, why: String, event: JSON?)
        /// An app reached 80% or 100% of its metered budget (a `usage` event): the agent's user is the one to reset it.
        case budget(JSON)
        case stopping
    }

    enum Answer {
        case done(JSON)
        /// The daemon said no: the prompt had closed (`not-found`), or another error.
        case refused(code: String, message: String)
    }

    let conn: Connection
    let privileged: Bool
    /// The open prompts the agent knows, by id, and changes not yet taken.
    private var open: [Int: JSON] = [:]
    var openPrompts: [JSON] { open.keys.sorted().compactMap { open[$0] } }
    private var pending: [Change] = []

    init(socketPath: String) {
        conn = Connection.open(socketPath)
        do {
            try conn.send(Request.subscribe([.prompts, .usage]).line)
            guard let ack = try conn.readLine(), let r = try? JSONParser.parse(ack) else { throw Errno(ECONNRESET) }
            guard r["ok"]?.boolValue == true else {
                die("\(r["error"]?.stringValue ?? "error"): \(r["message"]?.stringValue ?? ack)",
                    r["error"]?.stringValue == ErrorCode.permissionDenied.rawValue ? .mayNotAnswer : .failed)
            }
            privileged = r["privileged"]?.boolValue == true
        } catch {
            die("lost the connection to netpermd: \(error)", .unreachable)
        }
    }

    /// Whose processes an answer is for, for the agent's first words.
    var answersFor: String {
        privileged ? "the asking uid's processes (e: everyone's)" : "your own processes (uid \(getuid()))"
    }

    /// Whether changes are waiting without reading the socket (lines read with an answer's reply): take them before
    /// polling.
    var hasChanges: Bool { !pending.isEmpty || conn.hasLine }

    /// The changes, in order: those waiting, and with `reading` (the caller polled `conn.fd`) what has arrived. Exits
    /// when the daemon has gone.
    func changes(reading: Bool) -> [Change] {
        do {
            if reading, try !conn.fill() { die("netpermd closed the connection", .unreachable) }
            while conn.hasLine, let line = try conn.readLine() { note(line) }
        } catch {
            die("lost the connection to netpermd: \(error)", .unreachable)
        }
        defer { pending = [] }
        return pending
    }

    /// Answers prompt `id`; the events that come before the reply are kept for the next `read`.
    func answer(_ id: Int, _ choice: PromptChoice, everyone: Bool = false) -> Answer {
        exchange(Request.answer(prompt: id, .choice(choice, everyone: everyone)).line)
    }

    /// Closes prompt `id` unanswered (its notification was dismissed).
    func dismiss(_ id: Int) -> Answer { exchange(Request.answer(prompt: id, .dismiss).line) }

    private func exchange(_ request: String) -> Answer {
        do {
            try conn.send(request)
            while let line = try conn.readLine() {
                guard let r = try? JSONParser.parse(line) else { continue }
                if r["event"] != nil {
                    note(line)
                    continue
                }
                guard r["ok"]?.boolValue == true else {
                    return .refused(code: r["error"]?.stringValue ?? "error",
                                    message: r.forTerminal["message"]?.stringValue ?? SafeText.escape(line))
                }
                return .done(r)
            }
            die("netpermd closed the connection", .unreachable)
        } catch {
            die("lost the connection to netpermd: \(error)", .unreachable)
        }
    }

    private func note(_ line: String) {
        guard let e = try? JSONParser.parse(line), let name = e["event"]?.stringValue.flatMap(EventName.init) else { return }
        switch name {
        case .snapshot, .resync:
            let now = e["prompts"]?.arrayValue ?? []
            let ids = Set(now.compactMap { $0["id"]?.intValue })
            for id in open.keys.sorted() where !ids.contains(id) {
                open[id] = nil
                pending.append(.closed(id: id, why: "gone", event: nil))
            }
            for p in now { opened(p) }
        case .prompt:
            opened(e)
        case .promptExpired, .promptAnswered, .promptWithdrawn:
            guard let id = e["id"]?.intValue, open.removeValue(forKey: id) != nil else { return }
            pending.append(.closed(id: id, why: name.rawValue, event: e))
        case .usage:
            pending.append(.budget(e))
        case .stopping:
            pending.append(.stopping)
        case .unsubscribed:
            guard e["topics"]?.arrayValue?.contains(where: { $0.stringValue == "prompts" }) == true else { return }
            die("\(e["error"]?.stringValue ?? "permission-denied"): \(e["message"]?.stringValue ?? "no longer an agent")",
                .mayNotAnswer)
        case .link, .app, .policy, .overflow, .scopeWanted, .counted:
            break
        }
    }

    private func opened(_ p: JSON) {
        guard let id = p["id"]?.intValue, open[id] == nil else { return }
        open[id] = p
        pending.append(.opened(p))
    }
}
