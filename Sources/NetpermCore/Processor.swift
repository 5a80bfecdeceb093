/// What the daemon knows, as the request processor sees it.
public struct DaemonState: Sendable {
    public static let version = "0.1.0"

    /// False until the first full netlink dump has been taken and the policy loaded.
    public var ready: Bool
    public var network: NetworkState
    public var config: Config
    /// Incremented by each successful load; 1 after start-up.
    public var policyGeneration: Int
    /// The last failed reload's error; cleared by a successful one.
    public var policyError: String?
    public var decisions = Decisions()
    public var prompts = PromptBook()
    /// Privileged subscribers of `prompts`. With none, an undecided `ask` is a deny (`no-agent`): a device
    /// without a screen gets an answer, not an endless `awaiting-decision`.
    public var agents = 0

    public init(ready: Bool = false, network: NetworkState = NetworkState(), config: Config = Config(),
                policyGeneration: Int = 0, policyError: String? = nil) {
        self.ready = ready; self.network = network; self.config = config
        self.policyGeneration = policyGeneration; self.policyError = policyError
    }

    public func effectivePermissions(for match: AppMatch) -> EffectivePermissions {
        var e = decisions.apply(to: config.permissions(for: match.app), app: match.id)
        if agents == 0 { e.denyUndecided() }
        return e
    }

    public func verdict(for match: AppMatch) -> Verdict {
        Verdict.compute(app: match.id, matchedBy: match.matchedBy, effective: effectivePermissions(for: match),
                        network: network, ready: ready)
    }
}

/// The connection's peer as the processor needs it. A class: it is read for every request, and copying its
/// identity and the matched app's policy cost more retains and releases than the rest of deciding a QUERY.
public final class Caller: Sendable {
    public let identity: PeerIdentity
    public let match: AppMatch
    public let privileged: Bool

    public init(identity: PeerIdentity, match: AppMatch, privileged: Bool) {
        self.identity = identity; self.match = match; self.privileged = privileged
    }

    public convenience init(identity: PeerIdentity, config: Config, daemonUID: UInt32 = 0, adminGID: () -> UInt32?) {
        self.init(identity: identity, match: config.match(identity),
                  privileged: config.isPrivileged(identity, daemonUID: daemonUID, adminGID: adminGID))
    }

    /// Whether `match` (from `resolveApp`) is the caller's own app. resolveApp hands the caller's match back
    /// unchanged, so the id and how it matched suffice; comparing whole policies cost more than the answer.
    func owns(_ match: AppMatch) -> Bool {
        match.id == self.match.id && match.matchedBy == self.match.matchedBy
    }
}

public struct Response: Equatable, Sendable {
    /// Work the caller must do before it can reply (the processor does no I/O). Indirect: its payloads (a
    /// verdict, an app's policy) would make every `Response` large, and responses are copied on their way out.
    public indirect enum Action: Equatable, Sendable {
        case reload
        /// Send the acknowledgement, then the snapshot, then events.
        case subscribe(Set<Topic>)
        /// Reply when the app's verdict is available, or with `timeout` after the time-out (microseconds).
        case wait(AppMatch, timeoutMicroseconds: UInt64?, own: Bool)
        /// The app asked about itself and awaits a decision, or would if an agent listened (`unaskedKinds`):
        /// raise prompts, or say that nobody can be asked (the reply is already in `json`).
        case ask(Verdict)
        /// Store (lasting: on disk before replying) or hold a decision, then reply.
        case decide(app: String, kind: LinkKind, Permission, once: Bool)
        case forget(app: String, kind: LinkKind?)
    }

    /// The reply as a tree. A reply that carries a verdict keeps its parts instead (`verdictReply`) and builds
    /// the tree only when asked; the daemon sends it with `encode(into:)`, which writes the bytes directly.
    public var json: JSON { verdictReply?.json ?? tree }
    private var tree: JSON
    public private(set) var verdictReply: VerdictReply?
    /// Close the connection after sending this reply.
    public var close: Bool
    public var action: Action?
    /// Raw lines sent right after the reply (a subscription's snapshot).
    public var trailer: String?
    /// No reply yet: stop taking this client's requests until the daemon replies (keeps replies in order).
    public var hold: Bool
    /// The reply line already encoded, newline included (a repeated request answered from a cache); sent
    /// instead of encoding `json`.
    public var encoded: [UInt8]?

    public init(_ json: JSON, close: Bool = false, action: Action? = nil, trailer: String? = nil, hold: Bool = false) {
        self.tree = json; self.close = close; self.action = action; self.trailer = trailer; self.hold = hold
    }

    public init(_ reply: VerdictReply, action: Action? = nil) {
        self.init(.null, action: action)
        verdictReply = reply
    }

    /// The reply line, newline included, appended to `out`.
    public func encode(into out: ByteBuffer) {
        if let r = verdictReply { r.encode(into: out) } else { tree.encode(into: out) }
        out.append(0x0A)
    }

    /// The reply line as bytes, encoded in `scratch` (emptied first; reusing one saves its allocations).
    public func encodedLine(scratch: ByteBuffer = ByteBuffer(capacity: 512)) -> [UInt8] {
        scratch.count = 0
        encode(into: scratch)
        return Array(UnsafeBufferPointer(start: scratch.base, count: scratch.count))
    }

    public static var held: Response { Response(.null, hold: true) }

    public init(encoded: [UInt8]) {
        self.init(.null)
        self.encoded = encoded
    }

    /// Whether the reply depends only on the request, the caller and the daemon's state (no action, no effect on
    /// the connection): then the same request in the same state gets the same bytes.
    public var isPlainReply: Bool { action == nil && !close && !hold && trailer == nil }
}

/// The pure request processor: transport frames the line and sends the reply; everything else is here.
public enum Processor {
    public static func process(_ request: Request, state: DaemonState, caller: Caller) -> Response {
        func ok(_ fields: [(String, JSON)]) -> Response { Response(.object([("ok", true)] + fields)) }
        func error(_ code: ErrorCode, _ message: String) -> Response { Response(ProtocolError(code, message).reply) }
        let maxArgs: Int
        switch request.verb {
        case .query: maxArgs = 1
        case .wait, .forget: maxArgs = 2
        case .decide: maxArgs = 4
        case .subscribe: maxArgs = Topic.allCases.count
        case .ping, .help, .status, .links, .apps, .reload, .prompts, .quit: maxArgs = 0
        }
        if request.args.count > maxArgs {
            return error(.badArguments, "usage: \(request.verb.usage)")
        }
        switch request.verb {
        case .ping:
            return ok([("pong", true)])
        case .help:
            return ok([("verbs", .array(Verb.allCases.map {
                .object([("verb", .string($0.usage)), ("summary", .string($0.summary))])
            }))])
        case .status:
            let net = state.network
            let primary = net.primary
            return ok([
                ("version", .string(DaemonState.version)),
                ("ready", .bool(state.ready)),
                ("agents", .int(state.agents)),
                ("links", .int(net.links.count)),
                ("available", .bool(net.available)),
                ("primary", primary.map { .string($0.name) } ?? .null),
                ("primary_kind", primary.map { .string($0.kind.rawValue) } ?? .null),
                ("policy", .object([
                    ("generation", .int(state.policyGeneration)),
                    ("apps", .int(state.config.apps.count)),
                    ("error", state.policyError.map { .string($0) } ?? .null),
                ])),
            ])
        case .links:
            return ok([("links", .array(state.network.links.map(\.json)))])
        case .query:
            switch resolveApp(request.args.first, state: state, caller: caller) {
            case let .failure(e): return Response(e.reply)
            case let .success(match):
                let own = caller.owns(match)
                let v = state.verdict(for: match)
                let reply = VerdictReply(head: [("ok", true)], v, identity: own ? caller.identity : nil)
                return Response(reply, action: own && v.wantsAsking ? .ask(v) : nil)
            }
        case .wait:
            var args = request.args
            var timeout: UInt64?
            if let last = args.last, let first = last.unicodeScalars.first, !AppPolicy.isLetter(first) {
                guard let usec = parseSeconds(last) else {
                    return error(.badArguments, "bad time-out '\(last)': expected seconds, e.g. 30 or 0.5")
                }
                timeout = usec
                args.removeLast()
            }
            guard args.count <= 1 else { return error(.badArguments, "usage: \(request.verb.usage)") }
            // `WAIT 1 2`: two numbers, not an app and a time-out.
            if let name = args.first, let c = name.unicodeScalars.first, !AppPolicy.isLetter(c) {
                return error(.badArguments, "'\(name)' is not an app id (they start with a letter); "
                    + "usage: \(request.verb.usage)")
            }
            switch resolveApp(args.first, state: state, caller: caller) {
            case let .failure(e): return Response(e.reply)
            case let .success(match):
                let v = state.verdict(for: match)
                if v.available { return Response(VerdictReply(head: [("ok", true)], v)) }
                return Response(.null, action: .wait(match, timeoutMicroseconds: timeout, own: caller.owns(match)))
            }
        case .subscribe:
            switch Subscription.topics(from: request.args) {
            case let .failure(e): return Response(e.reply)
            case let .success(topics):
                if topics.contains(.prompts) && !caller.privileged {
                    return error(.permissionDenied, "only root or members of group '\(state.config.adminGroup)' "
                        + "may subscribe to prompts")
                }
                let list = Topic.allCases.filter(topics.contains).map { JSON.string($0.rawValue) }
                return Response(.object([("ok", true), ("subscribed", .array(list)),
                                         ("app", .string(caller.match.id)), ("privileged", .bool(caller.privileged))]),
                                action: .subscribe(topics))
            }
        case .apps:
            guard caller.privileged else {
                return error(.permissionDenied, "APPS needs root or membership of group '\(state.config.adminGroup)'")
            }
            return ok([("apps", .array(state.config.apps.map {
                state.verdict(for: AppMatch(id: $0.id, matchedBy: .name, app: $0)).json
            }))])
        case .reload:
            guard caller.privileged else {
                return error(.permissionDenied, "RELOAD needs root or membership of group '\(state.config.adminGroup)'")
            }
            return Response(.null, action: .reload)
        case .prompts:
            guard caller.privileged else {
                return error(.permissionDenied, "PROMPTS needs root or membership of group '\(state.config.adminGroup)'")
            }
            return ok([("prompts", .array(state.prompts.open.map(\.json)))])
        case .decide:
            guard caller.privileged else {
                return error(.permissionDenied, "DECIDE needs root or membership of group '\(state.config.adminGroup)'")
            }
            var args = request.args
            let once = args.last == "--once"
            if once { args.removeLast() }
            guard args.count == 3 else { return error(.badArguments, "usage: \(request.verb.usage)") }
            guard AppPolicy.isValidID(args[0]) else { return error(.badArguments, "invalid app id '\(args[0])'") }
            guard let kind = decidableKind(args[1]) else {
                return error(.badArguments, "bad kind '\(args[1])' (expected wifi, wwan, ethernet or other)")
            }
            guard let p = Permission(rawValue: args[2].lowercased()), p != .ask else {
                return error(.badArguments, "bad decision '\(args[2])' (expected allow or deny)")
            }
            return Response(.null, action: .decide(app: args[0], kind: kind, p, once: once))
        case .forget:
            guard caller.privileged else {
                return error(.permissionDenied, "FORGET needs root or membership of group '\(state.config.adminGroup)'")
            }
            guard let app = request.args.first, AppPolicy.isValidID(app) else {
                return error(.badArguments, "usage: \(request.verb.usage)")
            }
            var kind: LinkKind?
            if request.args.count == 2 {
                guard let k = decidableKind(request.args[1]) else {
                    return error(.badArguments, "bad kind '\(request.args[1])' (expected wifi, wwan, ethernet or other)")
                }
                kind = k
            }
            return Response(.null, action: .forget(app: app, kind: kind))
        case .quit:
            return Response(.object([("ok", true), ("bye", true)]), close: true)
        }
    }

    static func decidableKind(_ s: String) -> LinkKind? {
        guard let k = LinkKind(rawValue: s.lowercased()), k != .loopback else { return nil }
        return k
    }

    /// The reply to DECIDE once the daemon has stored it; `effective` tells whether the policy overrides it.
    public static func decideReply(app: String, kind: LinkKind, _ p: Permission, once: Bool, state: DaemonState,
                                   match: AppMatch) -> JSON {
        let v = state.verdict(for: match)
        let overridden = v.sources[kind] == nil && state.config.permissions(for: match.app)[kind] != .ask
        return VerdictReply(head: [("ok", true), ("decided", .object([
            ("app", .string(app)), ("kind", .string(kind.rawValue)), ("decision", .string(p.rawValue)),
            ("once", .bool(once)), ("overridden_by_policy", .bool(overridden)),
        ]))], v).json
    }

    /// The app a request names: the caller's own, or (privileged callers only) one from the policy.
    static func resolveApp(_ name: String?, state: DaemonState, caller: Caller) -> Result<AppMatch, ProtocolError> {
        guard let name, name != caller.match.id else { return .success(caller.match) }
        guard caller.privileged else {
            return .failure(ProtocolError(.permissionDenied, "only root or members of group "
                + "'\(state.config.adminGroup)' may name another app; leave APP out to ask about yourself "
                + "(\(caller.match.id))"))
        }
        guard let app = state.config.app(named: name) else {
            return .failure(ProtocolError(.notFound, "no [App \(name)] in the policy"))
        }
        return .success(AppMatch(id: app.id, matchedBy: .name, app: app))
    }

    /// "30", "0.5" -> microseconds; nil for anything else (negative, NaN, words).
    public static func parseSeconds(_ s: String) -> UInt64? {
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

    /// The reply to a WAIT that ran out of time: the verdict that held, so the caller knows why.
    public static func waitTimeout(_ v: Verdict) -> JSON {
        VerdictReply(head: [("ok", false), ("error", "timeout"),
                            ("message", .string("\(v.app) may not use the network yet: \(v.reason.rawValue)"))], v).json
    }

    public static func waitDone(_ v: Verdict) -> JSON {
        VerdictReply(head: [("ok", true)], v).json
    }

    /// The reply to RELOAD once the caller has tried it.
    public static func reloadReply(state: DaemonState, error: String?) -> Response {
        if let error { return Response(ProtocolError(.policyInvalid, error).reply) }
        return Response(.object([("ok", true), ("generation", .int(state.policyGeneration)),
                                 ("apps", .int(state.config.apps.count))]))
    }

    /// Handles one framed line end to end: parse, process. Nil for a blank line.
    public static func handle(_ frame: LineFramer.Frame, state: DaemonState, caller: Caller) -> Response? {
        switch frame {
        case .tooLong:
            return Response(RequestParser.tooLong.reply)
        case let .line(bytes):
            switch RequestParser.parse(bytes) {
            case nil: return nil
            case let .failure(e)?: return Response(e.reply)
            case let .success(req)?: return process(req, state: state, caller: caller)
            }
        }
    }
}

/// A reply that carries a verdict among its own members: `head`, the verdict's, then the asker's `identity`
/// when it asked about itself. A class, so that a `Response` holding one stays small: it is copied several times
/// on its way out.
public final class VerdictReply: Equatable, Sendable {
    public let head: [(StaticString, JSON)]
    public let verdict: Verdict
    public let identity: PeerIdentity?

    public init(head: [(StaticString, JSON)], _ verdict: Verdict, identity: PeerIdentity? = nil) {
        self.head = head; self.verdict = verdict; self.identity = identity
    }

    public static func == (a: VerdictReply, b: VerdictReply) -> Bool {
        a.verdict == b.verdict && a.identity == b.identity
            && JSON.object(a.head.map { ($0.description, $1) }) == JSON.object(b.head.map { ($0.description, $1) })
    }

    public var json: JSON {
        var tree = JSONTreeSink(capacity: head.count + 10)
        write(to: &tree)
        return .object(tree.members)
    }

    /// The same bytes as `json.encode(into:)`, without building the tree.
    public func encode(into out: ByteBuffer) {
        var sink = JSONByteSink(out)
        write(to: &sink)
        sink.close()
    }

    private func write<S: JSONSink>(to s: inout S) {
        for (k, v) in head { s.field(k, v) }
        verdict.write(to: &s)
        if let identity { s.object("identity") { identity.write(to: &$0) } }
    }
}
