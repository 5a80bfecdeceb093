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

    public init(ready: Bool = false, network: NetworkState = NetworkState(), config: Config = Config(),
                policyGeneration: Int = 0, policyError: String? = nil) {
        self.ready = ready; self.network = network; self.config = config
        self.policyGeneration = policyGeneration; self.policyError = policyError
    }

    public func verdict(for match: AppMatch) -> Verdict {
        Verdict.compute(app: match.id, matchedBy: match.matchedBy, permissions: config.permissions(for: match.app),
                        network: network, ready: ready)
    }
}

/// The connection's peer as the processor needs it.
public struct Caller: Sendable {
    public var identity: PeerIdentity
    public var match: AppMatch
    public var privileged: Bool

    public init(identity: PeerIdentity, match: AppMatch, privileged: Bool) {
        self.identity = identity; self.match = match; self.privileged = privileged
    }

    public init(identity: PeerIdentity, config: Config) {
        self.init(identity: identity, match: config.match(identity), privileged: config.isPrivileged(identity))
    }
}

public struct Response: Equatable, Sendable {
    /// Work the caller must do before it can reply (the processor does no I/O).
    public enum Action: Equatable, Sendable { case reload }

    public var json: JSON
    /// Close the connection after sending this reply.
    public var close: Bool
    public var action: Action?
    public init(_ json: JSON, close: Bool = false, action: Action? = nil) {
        self.json = json; self.close = close; self.action = action
    }
}

/// The pure request processor: transport frames the line and sends the reply; everything else is here.
public enum Processor {
    public static func process(_ request: Request, state: DaemonState, caller: Caller) -> Response {
        func ok(_ fields: [(String, JSON)]) -> Response { Response(.object([("ok", true)] + fields)) }
        func error(_ code: ErrorCode, _ message: String) -> Response { Response(ProtocolError(code, message).reply) }
        let maxArgs = request.verb == .query ? 1 : 0
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
            guard let name = request.args.first, name != caller.match.id else {
                let v = state.verdict(for: caller.match)
                return Response(merge(ok([]).json, v.json, [("identity", caller.identity.json)]))
            }
            guard caller.privileged else {
                return error(.permissionDenied, "only root or members of group '\(state.config.adminGroup)' may ask "
                    + "about another app; send QUERY alone to ask about yourself (\(caller.match.id))")
            }
            guard let app = state.config.app(named: name) else {
                return error(.notFound, "no [App \(name)] in the policy")
            }
            let v = state.verdict(for: AppMatch(id: app.id, matchedBy: .name, app: app))
            return Response(merge(ok([]).json, v.json, []))
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
        case .quit:
            return Response(.object([("ok", true), ("bye", true)]), close: true)
        }
    }

    /// The reply to RELOAD once the caller has tried it.
    public static func reloadReply(state: DaemonState, error: String?) -> Response {
        if let error { return Response(ProtocolError(.policyInvalid, error).reply) }
        return Response(.object([("ok", true), ("generation", .int(state.policyGeneration)),
                                 ("apps", .int(state.config.apps.count))]))
    }

    private static func merge(_ a: JSON, _ b: JSON, _ extra: [(String, JSON)]) -> JSON {
        guard case let .object(x) = a, case let .object(y) = b else { return a }
        return .object(x + y + extra)
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
