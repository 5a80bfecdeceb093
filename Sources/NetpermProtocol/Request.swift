// SPDX-License-Identifier: LGPL-2.1-or-later
/// A request line read once: its verb with that verb's arguments, typed. Only the syntax of the words is checked
/// here; what depends on the daemon's state (whether an app is in the policy, a prompt is open, the caller may use
/// the verb) is the engine's.
public enum Request: Equatable, Sendable {
    case ping, help, status, links
    /// QUERY [APP]: nil for the caller's own app.
    case query(app: String?)
    /// REACH ADDRESS [SECONDS]: the address, as written too (replies and logs repeat it), and the time-out in
    /// microseconds.
    case reach(IPAddress, text: String, timeout: UInt64?)
    case apps, reload
    /// SUBSCRIBE [TOPIC...]: no topic named means `Topic.defaults`.
    case subscribe(Set<Topic>)
    /// WAIT [APP] [SECONDS]: nil app for the caller's own; the time-out in microseconds.
    case wait(app: String?, timeout: UInt64?)
    case prompts
    /// ANSWER ID allow|deny|once [--everyone], or ANSWER ID dismiss.
    case answer(prompt: Int, PromptAnswer)
    /// DECIDE APP KIND allow|deny [--once]: the decision is `.allow` or `.deny`, never `.ask`.
    case decide(app: String, kind: PolicyDimension, Permission, once: Bool)
    /// FORGET APP [KIND]: nil kind for every kind.
    case forget(app: String, kind: PolicyDimension?)
    case decisions, metrics
    /// USAGE [APP]: nil for the caller's own apps.
    case usage(app: String?)
    /// RESET-USAGE [APP]: nil for every app.
    case resetUsage(app: String?)
    /// SCOPE ID made|failed [WHY...]: what became of a `scope-wanted` event's scope; `why` only when it failed.
    case scope(id: Int, failed: String?)
    /// OWNS NAME PID: the caller's session bus says process PID owns well-known name NAME.
    case owns(name: String, pid: Int32)
    /// REPORT [APP], RESET-REPORT [APP]: nil for every app the caller may see.
    case report(app: String?)
    case resetReport(app: String?)
    /// KEEP-REPORT yes|no: the caller's own apps recorded or not.
    case keepReport(Bool)
    case quit

    public var verb: Verb {
        switch self {
        case .ping: .ping
        case .help: .help
        case .status: .status
        case .links: .links
        case .query: .query
        case .reach: .reach
        case .apps: .apps
        case .reload: .reload
        case .subscribe: .subscribe
        case .wait: .wait
        case .prompts: .prompts
        case .answer: .answer
        case .decide: .decide
        case .forget: .forget
        case .decisions: .decisions
        case .metrics: .metrics
        case .usage: .usage
        case .resetUsage: .resetUsage
        case .scope: .scope
        case .owns: .owns
        case .report: .report
        case .resetReport: .resetReport
        case .keepReport: .keepReport
        case .quit: .quit
        }
    }
}

/// What an ANSWER says of its prompt.
public enum PromptAnswer: Equatable, Sendable {
    /// Allow, deny or once; `everyone`: for every uid (`--everyone`), not only the one whose process asked.
    case choice(PromptChoice, everyone: Bool)
    /// Closed unanswered (a notification dismissed): nothing is stored.
    case dismiss
}

/// A request line that is not one: the protocol's error for it, and the verb it named when only the words after
/// that verb are wrong (not too many of them). Then the caller's access to the verb is checked before this error
/// is told, as the engine did when it read the words itself: one who may not DECIDE hears that, whatever its words.
public struct RequestError: Error, Equatable, Sendable {
    public var error: ProtocolError
    public var verb: Verb?
    public init(_ error: ProtocolError, verb: Verb? = nil) { self.error = error; self.verb = verb }
}

extension Request {
    /// The request `verb` with `words` after it; the protocol's error when they are not its arguments.
    public init(_ verb: Verb, words: [String]) throws(ProtocolError) {
        func usage() -> ProtocolError { ProtocolError(.badArguments, "usage: \(verb.usage)") }
        switch verb {
        case .ping: self = .ping
        case .help: self = .help
        case .status: self = .status
        case .links: self = .links
        case .apps: self = .apps
        case .reload: self = .reload
        case .prompts: self = .prompts
        case .decisions: self = .decisions
        case .metrics: self = .metrics
        case .quit: self = .quit
        case .query: self = .query(app: words.first)
        case .usage: self = .usage(app: words.first)
        case .resetUsage: self = .resetUsage(app: words.first)
        case .report: self = .report(app: words.first)
        case .resetReport: self = .resetReport(app: words.first)
        case .keepReport:
            switch words.first?.lowercased() {
            case "yes"?: self = .keepReport(true)
            case "no"?: self = .keepReport(false)
            default: throw usage()
            }
        case .subscribe: self = .subscribe(try Topic.set(from: words).get())
        case .reach: self = try Self.parseReach(words)
        case .wait: self = try Self.parseWait(words)
        case .answer: self = try Self.parseAnswer(words)
        case .decide: self = try Self.parseDecide(words)
        case .owns:
            guard words.count == 2, let pid = Int32(words[1]), pid > 0, !words[0].isEmpty, words[0].utf8.count <= 255
            else { throw usage() }
            self = .owns(name: words[0], pid: pid)
        case .scope:
            guard words.count >= 2, let id = Int(words[0]) else { throw usage() }
            switch words[1].lowercased() {
            case "made" where words.count == 2: self = .scope(id: id, failed: nil)
            case "failed": self = .scope(id: id, failed: words.count > 2 ? words[2...].joined(separator: " ") : "")
            default: throw usage()
            }
        case .forget:
            guard let app = words.first, AppName.isValid(app) else { throw usage() }
            var kind: PolicyDimension?
            if words.count == 2 { kind = try PolicyDimension.named(words[1]) }
            self = .forget(app: app, kind: kind)
        }
    }

    private static func usageError(_ verb: Verb) -> ProtocolError { ProtocolError(.badArguments, "usage: \(verb.usage)") }

    /// REACH ADDRESS [SECONDS]
    private static func parseReach(_ words: [String]) throws(ProtocolError) -> Request {
        guard let text = words.first, words.count <= 2 else { throw Self.usageError(.reach) }
        guard let address = IPAddress(text) else {
            throw ProtocolError(.badArguments, "\(SafeText.quote(text)) is not an IP address "
                + "(e.g. 192.0.2.1 or 2001:db8::1, without a port or zone)")
        }
        var timeout: UInt64?
        if words.count == 2 { timeout = try Seconds.timeOut(words[1]) }
        return .reach(address, text: text, timeout: timeout)
    }

    /// WAIT [APP] [SECONDS]: a last word that does not start with a letter is the time-out.
    private static func parseWait(_ words: [String]) throws(ProtocolError) -> Request {
        var args = words
        var timeout: UInt64?
        if let last = args.last, let first = last.unicodeScalars.first, !AppName.isLetter(first) {
            timeout = try Seconds.timeOut(last)
            args.removeLast()
        }
        guard args.count <= 1 else { throw Self.usageError(.wait) }
        // `WAIT 1 2`: two numbers, not an app and a time-out.
        if let name = args.first, let c = name.unicodeScalars.first, !AppName.isLetter(c) {
            throw ProtocolError(.badArguments, "\(SafeText.quote(name)) is not an app id (they start with a letter); "
                + "usage: \(Verb.wait.usage)")
        }
        return .wait(app: args.first, timeout: timeout)
    }

    /// ANSWER ID CHOICE [--everyone], or ANSWER ID dismiss.
    private static func parseAnswer(_ words: [String]) throws(ProtocolError) -> Request {
        var args = words
        let everyone = args.last == "--everyone"
        if everyone { args.removeLast() }
        if args.count == 2, !everyone, let id = Int(args[0]), args[1].lowercased() == "dismiss" {
            return .answer(prompt: id, .dismiss)
        }
        guard args.count == 2, let id = Int(args[0]), let choice = PromptChoice(rawValue: args[1].lowercased()) else {
            throw Self.usageError(.answer)
        }
        return .answer(prompt: id, .choice(choice, everyone: everyone))
    }

    /// DECIDE APP KIND allow|deny [--once]
    private static func parseDecide(_ words: [String]) throws(ProtocolError) -> Request {
        var args = words
        let once = args.last == "--once"
        if once { args.removeLast() }
        guard args.count == 3 else { throw Self.usageError(.decide) }
        guard AppName.isValid(args[0]) else {
            throw ProtocolError(.badArguments, "invalid app id \(SafeText.quote(args[0]))")
        }
        let kind = try PolicyDimension.named(args[1])
        guard let p = Permission(rawValue: args[2].lowercased()), p != .ask else {
            throw ProtocolError(.badArguments, "bad decision \(SafeText.quote(args[2])) (expected allow or deny)")
        }
        return .decide(app: args[0], kind: kind, p, once: once)
    }
}

extension Request {
    /// The line a client sends for it (without the newline): what `RequestParser` reads back as this request (a
    /// subscription to no topic is written as SUBSCRIBE alone, which means the default ones).
    public var line: String {
        var words = [verb.rawValue.uppercased()]
        switch self {
        case .ping, .help, .status, .links, .apps, .reload, .prompts, .decisions, .metrics, .quit: break
        case let .query(app), let .usage(app), let .resetUsage(app), let .report(app), let .resetReport(app):
            if let app { words.append(app) }
        case let .keepReport(on):
            words.append(on ? "yes" : "no")
        case let .reach(_, text, timeout):
            words.append(text)
            if let timeout { words.append(Seconds.text(timeout)) }
        case let .subscribe(topics):
            words += Topic.allCases.filter(topics.contains).map(\.rawValue)
        case let .wait(app, timeout):
            if let app { words.append(app) }
            if let timeout { words.append(Seconds.text(timeout)) }
        case let .answer(id, .choice(choice, everyone)):
            words += [String(id), choice.rawValue] + (everyone ? ["--everyone"] : [])
        case let .answer(id, .dismiss):
            words += [String(id), "dismiss"]
        case let .decide(app, kind, p, once):
            words += [app, kind.rawValue, p.rawValue] + (once ? ["--once"] : [])
        case let .forget(app, kind):
            words.append(app)
            if let kind { words.append(kind.rawValue) }
        case let .owns(name, pid):
            words += [name, String(pid)]
        case let .scope(id, failed):
            words += [String(id), failed == nil ? "made" : "failed"]
            if let failed, !failed.isEmpty { words.append(failed) }
        }
        return words.joined(separator: " ")
    }
}

extension Verb {
    /// How many words may follow the verb.
    public var maxArgs: Int {
        switch self {
        case .query, .usage, .resetUsage, .report, .resetReport, .keepReport: return 1
        case .wait, .forget, .reach: return 2
        case .answer: return 3
        case .decide: return 4
        case .subscribe: return Topic.allCases.count
        case .scope: return 66
        case .owns: return 2
        case .ping, .help, .status, .links, .apps, .reload, .prompts, .decisions, .metrics, .quit: return 0
        }
    }
}

extension Topic {
    /// `SUBSCRIBE [TOPIC...]`'s topics, in any case; none means the default ones.
    public static func set(from words: [String]) -> Result<Set<Topic>, ProtocolError> {
        guard !words.isEmpty else { return .success(Topic.defaults) }
        var topics: Set<Topic> = []
        for a in words {
            guard let t = Topic(rawValue: a.lowercased()) else {
                return .failure(ProtocolError(.badArguments, "unknown topic \(SafeText.quote(a)) (expected "
                    + Topic.allCases.map(\.rawValue).joined(separator: ", ") + ")"))
            }
            topics.insert(t)
        }
        return .success(topics)
    }
}

extension PolicyDimension {
    /// What DECIDE and FORGET name: a kind of link other than loopback, `metered` or `roaming`, in any case.
    static func named(_ word: String) throws(ProtocolError) -> PolicyDimension {
        guard let kind = PolicyDimension(rawValue: word.lowercased()) else {
            throw ProtocolError(.badArguments, "bad kind \(SafeText.quote(word)) "
                + "(expected wifi, wwan, ethernet, other, metered or roaming)")
        }
        return kind
    }
}

extension Seconds {
    /// Microseconds as SECONDS, to the microsecond ("1.500000"): what `parseMicroseconds` reads back exactly.
    public static func text(_ microseconds: UInt64) -> String {
        let frac = String(microseconds % 1_000_000)
        return "\(microseconds / 1_000_000)." + String(repeating: "0", count: 6 - frac.count) + frac
    }

    /// A request's SECONDS (WAIT, REACH) in microseconds, or the error that says it is none.
    static func timeOut(_ text: String) throws(ProtocolError) -> UInt64 {
        guard let usec = parseMicroseconds(text) else {
            throw ProtocolError(.badArguments, "bad time-out \(SafeText.quote(text)): expected seconds, e.g. 30 or 0.5")
        }
        return usec
    }
}

/// App ids as requests (and the policy) write them.
public enum AppName {
    /// App ids start with a letter, then letters, digits, '.', '-', '_'.
    public static func isValid(_ s: String) -> Bool {
        guard let first = s.unicodeScalars.first, isLetter(first) else { return false }
        return s.unicodeScalars.allSatisfy { isLetter($0) || ("0"..."9").contains($0) || $0 == "." || $0 == "-" || $0 == "_" }
    }

    /// An ASCII letter.
    public static func isLetter(_ c: Unicode.Scalar) -> Bool { ("a"..."z").contains(c) || ("A"..."Z").contains(c) }
}
