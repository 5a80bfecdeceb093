// SPDX-License-Identifier: LGPL-2.1-or-later
/// Error codes a reply can carry in `"error"`. Stable: clients match on them.
public enum ErrorCode: String, Sendable, CaseIterable {
    case lineTooLong = "line-too-long"
    case invalidUTF8 = "invalid-utf8"
    case nulByte = "nul-byte"
    case unknownVerb = "unknown-verb"
    case badArguments = "bad-arguments"
    case permissionDenied = "permission-denied"
    case notFound = "not-found"
    case notReady = "not-ready"
    case policyInvalid = "policy-invalid"
    case noIdentity = "no-identity"
    case timeout
    /// A user has decided for `Engine.maxOwnApps` apps of their own: FORGET some first.
    case tooManyDecisions = "too-many-decisions"
    case internalError = "internal"
    /// Sent, as the only line, to a connection refused past a limit; then it is closed.
    case tooManyConnections = "too-many-connections"
}

public enum Verb: String, Sendable, CaseIterable {
    case ping, help, status, links, query, reach, apps, reload, subscribe, wait, prompts, answer, decide, forget, decisions,
         metrics, usage
    case resetUsage = "reset-usage"
    case scope, owns
    case report
    case resetReport = "reset-report"
    case keepReport = "keep-report"
    case quit

    /// The verb a request's first word names, in any case; nil for anything else. Compares bytes: building a
    /// lowercased String for `init(rawValue:)` cost more than the rest of parsing.
    init?(ascii word: ArraySlice<UInt8>) {
        for (verb, name) in Verb.names where name.count == word.count {
            if zip(name, word).allSatisfy({ $0 == ($1 >= 0x41 && $1 <= 0x5A ? $1 | 0x20 : $1) }) {
                self = verb
                return
            }
        }
        return nil
    }

    /// `allCases` builds a new array on every call.
    private static let names: [(Verb, [UInt8])] = allCases.map { ($0, Array($0.rawValue.utf8)) }

    public var usage: String {
        switch self {
        case .ping: return "PING"
        case .help: return "HELP"
        case .status: return "STATUS"
        case .links: return "LINKS"
        case .query: return "QUERY [APP]"
        case .reach: return "REACH ADDRESS [SECONDS]"
        case .apps: return "APPS"
        case .reload: return "RELOAD"
        case .subscribe: return "SUBSCRIBE [links] [apps] [policy] [prompts] [self] [usage] [mine] [scopes]"
        case .wait: return "WAIT [APP] [SECONDS]"
        case .prompts: return "PROMPTS"
        case .answer: return "ANSWER ID allow|deny|once|dismiss [--everyone]"
        case .decide: return "DECIDE APP KIND allow|deny [--once]"
        case .forget: return "FORGET APP [KIND]"
        case .decisions: return "DECISIONS"
        case .metrics: return "METRICS"
        case .usage: return "USAGE [APP]"
        case .resetUsage: return "RESET-USAGE [APP]"
        case .scope: return "SCOPE ID made|failed [WHY]"
        case .owns: return "OWNS NAME PID"
        case .report: return "REPORT [APP]"
        case .resetReport: return "RESET-REPORT [APP]"
        case .keepReport: return "KEEP-REPORT yes|no"
        case .quit: return "QUIT"
        }
    }

    public var summary: String {
        switch self {
        case .ping: return "check that the daemon answers"
        case .help: return "list the verbs"
        case .status: return "version, readiness, link count, whether the network is available, the primary link"
        case .links: return "every link with its kind, state, addresses and default routes"
        case .query: return "may this app (default: the caller) use the network now, and if not, why"
        case .reach: return "may the caller reach this address now, by the link the kernel would send it by; an app that asks raises the prompt, and with SECONDS the reply waits for its answer"
        case .apps: return "every app in the policy with its verdict (privileged)"
        case .reload: return "reload the configuration and policy now (privileged)"
        case .subscribe: return "a snapshot, then an event line for every change, for as long as the connection lives"
        case .wait: return "reply once the app (default: the caller) may use the network, or when SECONDS pass"
        case .prompts: return "the open prompts (privileged: all; a user: their own)"
        case .answer: return "answer an open prompt: allow, deny (not this kind) or once, for the uid whose process asked (privileged: --everyone for all), or dismiss it unanswered; refused once it has closed"
        case .decide: return "decide for an app and kind (or metered) set to ask; lasting unless --once (privileged: for everyone; a user: for their own processes)"
        case .forget: return "remove decisions of an app (privileged: everyone's and every user's; a user: their own)"
        case .decisions: return "every decision, for everyone and per uid (privileged; a user: their own)"
        case .metrics: return "counters and gauges in Prometheus' text format, as one JSON string (privileged)"
        case .usage: return "data used per app and kind of link, this period and the last, and budgets (your own apps unless privileged)"
        case .resetUsage: return "start an app's (default: every app's) counts of this period from zero (privileged)"
        case .scope: return "say what became of a scope-wanted event's scope (the subscriber of scopes it was sent to)"
        case .owns: return "tell that a process of the caller's uid owns a well-known name on its session bus (an app's ID: that app, found by its name)"
        case .report: return "the privacy report: where each app went and what was refused, per destination (your own apps unless privileged)"
        case .resetReport: return "delete an app's (default: every app's) report entries (a user: their own)"
        case .keepReport: return "turn the report on or off for your own apps (off deletes their entries)"
        case .quit: return "close this connection"
        }
    }
}

extension Request {
    /// The longest request line, newline excluded; the transport discards longer ones.
    public static let maxLine = 4096
}

public struct ProtocolError: Error, Equatable, Sendable {
    public var code: ErrorCode
    public var message: String
    public init(_ code: ErrorCode, _ message: String) { self.code = code; self.message = message }

    /// `{"ok":false,"error":CODE,"message":...` members, for a reply that may carry more (WAIT's time-out).
    public func write(to s: inout JSONWriter) {
        s.field("ok", false)
        s.field("error", code.rawValue)
        s.field("message", message)
    }

    /// The whole reply line, for an edge that answers by itself (a refused connection).
    public var line: [UInt8] {
        let b = ByteBuffer(capacity: 256)
        var w = JSONWriter(b)
        write(to: &w)
        w.close()
        b.append(0x0A)
        return Array(UnsafeBufferPointer(start: b.base, count: b.count))
    }
}

public enum RequestParser {
    /// Parses one framed line into its verb and that verb's arguments. Returns nil for a blank line, which is not a
    /// request and gets no reply.
    public static func parse(_ line: [UInt8]) -> Result<Request, RequestError>? {
        if line.contains(0) { return .failure(RequestError(ProtocolError(.nulByte, "request contains a NUL byte"))) }
        // ASCII (nearly every request) is valid UTF-8 without building a String to find out.
        guard line.allSatisfy({ $0 < 0x80 }) || String(validating: line, as: UTF8.self) != nil else {
            return .failure(RequestError(ProtocolError(.invalidUTF8, "request is not valid UTF-8")))
        }
        // Split on bytes, not Characters: grapheme breaking is the costliest part of a request otherwise,
        // and the separators are ASCII (a UTF-8 continuation byte is never one of them).
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0D }
        var i = line.startIndex
        func nextWord() -> ArraySlice<UInt8>? {
            while i < line.endIndex, isSpace(line[i]) { i += 1 }
            guard i < line.endIndex else { return nil }
            let start = i
            while i < line.endIndex, !isSpace(line[i]) { i += 1 }
            return line[start..<i]
        }
        guard let first = nextWord() else { return nil }
        guard let verb = Verb(ascii: first) else {
            let shown = String(decoding: first, as: UTF8.self)
            return .failure(RequestError(ProtocolError(.unknownVerb,
                                                       "unknown verb '\(shown.prefix(64))'; send HELP for the list")))
        }
        var words: [String] = []
        while let word = nextWord() { words.append(String(decoding: word, as: UTF8.self)) }
        guard words.count <= verb.maxArgs else {
            return .failure(RequestError(ProtocolError(.badArguments, "usage: \(verb.usage)")))
        }
        do throws(ProtocolError) {
            return .success(try Request(verb, words: words))
        } catch {
            return .failure(RequestError(error, verb: verb))
        }
    }

    public static var tooLong: ProtocolError {
        ProtocolError(.lineTooLong, "request longer than \(Request.maxLine) bytes; it was discarded")
    }
}

/// Time-outs as requests and netpermctl write them.
public enum Seconds {
    /// "30", "0.5" -> microseconds; nil for anything else (negative, NaN, words).
    public static func parseMicroseconds(_ s: String) -> UInt64? {
        let parts = s.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count >= 1, parts.count <= 2, !s.isEmpty,
              parts.allSatisfy({ $0.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") } }),
              let whole = parts[0].isEmpty ? 0 : UInt64(parts[0]), whole < 100_000_000 else { return nil }
        var frac: UInt64 = 0
        if parts.count == 2 {
            let digits = String(parts[1].prefix(6))
            guard !(parts[0].isEmpty && digits.isEmpty) else { return nil }
            frac = (UInt64(digits) ?? 0) * [1, 100_000, 10_000, 1000, 100, 10, 1][digits.count]
        }
        return whole * 1_000_000 + frac
    }
}
