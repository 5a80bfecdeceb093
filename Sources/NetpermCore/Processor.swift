/// What the daemon knows, as the request processor sees it.
public struct DaemonState: Sendable {
    public static let version = "0.1.0"

    /// False until the first full netlink dump has been taken.
    public var ready: Bool
    public var network: NetworkState

    public init(ready: Bool = false, network: NetworkState = NetworkState()) {
        self.ready = ready; self.network = network
    }
}

public struct Response: Equatable, Sendable {
    public var json: JSON
    /// Close the connection after sending this reply.
    public var close: Bool
    public init(_ json: JSON, close: Bool = false) { self.json = json; self.close = close }
}

/// The pure request processor: transport frames the line and sends the reply; everything else is here.
public enum Processor {
    public static func process(_ request: Request, state: DaemonState) -> Response {
        func ok(_ fields: [(String, JSON)]) -> Response { Response(.object([("ok", true)] + fields)) }
        func noArgs() -> ProtocolError? {
            request.args.isEmpty ? nil : ProtocolError(.badArguments, "\(request.verb.usage) takes no arguments")
        }
        if let e = noArgs() { return Response(e.reply) }
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
            ])
        case .links:
            return ok([("links", .array(state.network.links.map(\.json)))])
        case .quit:
            return Response(.object([("ok", true), ("bye", true)]), close: true)
        }
    }

    /// Handles one framed line end to end: parse, process, encode. Nil for a blank line.
    public static func handle(_ frame: LineFramer.Frame, state: DaemonState) -> Response? {
        switch frame {
        case .tooLong:
            return Response(RequestParser.tooLong.reply)
        case let .line(bytes):
            switch RequestParser.parse(bytes) {
            case nil: return nil
            case let .failure(e)?: return Response(e.reply)
            case let .success(req)?: return process(req, state: state)
            }
        }
    }
}
