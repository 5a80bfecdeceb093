// SPDX-License-Identifier: LGPL-2.1-or-later

/// The D-Bus face's words (docs/DBUS.md): each method of `org.netpermd.NetPerm1` is one request of the socket's,
/// made for the caller the bus names, and answered with that request's reply. Pure: the daemon's bus edge reads the
/// arguments, this says which line they are, what polkit must allow first, and which part of the reply goes back.
public enum BusNames {
    public static let service = "org.netpermd.NetPerm1"
    public static let path = "/org/netpermd/NetPerm1"
    public static let interface = "org.netpermd.NetPerm1"
    /// The calls that change something: a sub-interface of its own, versioned with the name.
    public static let decisions = "org.netpermd.NetPerm1.Decisions"
    public static let errorPrefix = "org.netpermd.NetPerm1.Error."
}

/// A polkit action of the bus face (data/org.netpermd.NetPerm1.policy).
public enum BusAction: String, Equatable, Sendable, CaseIterable {
    /// Deciding and answering for the caller's own processes; keeping and clearing their own apps' report.
    case decideOwn = "org.netpermd.NetPerm1.decide-own"
    /// Deciding, answering and forgetting for everyone; clearing everyone's report; reloading the policy.
    case manage = "org.netpermd.NetPerm1.manage"
    /// Reading every app's verdict, usage, prompts, decisions and report (other users' among them).
    case readAll = "org.netpermd.NetPerm1.read-all"

    /// Whether polkit's yes makes the call a privileged one (as root's on the socket): for everyone's view or
    /// everyone's decisions. Deciding for oneself stays unprivileged: the engine keeps it to the caller's uid.
    public var grantsPrivilege: Bool {
        switch self {
        case .decideOwn: return false
        case .manage, .readAll: return true
        }
    }
}

/// An argument as the bus carried it.
public enum BusArgument: Equatable, Sendable {
    case string(String)
    case bool(Bool)
    case uint32(UInt32)
    case strings([String])
}

/// Which part of the socket's reply is the method's answer.
public enum BusReplyShape: Equatable, Sendable {
    /// The reply object, `a{sv}`, without its `ok`.
    case object
    /// One member of it, an array of objects, `aa{sv}`.
    case member(String)
    /// The one element of the reply's `apps` whose `app` is this (the caller's own list: APPS' rules), `a{sv}`.
    case app(String)
    /// SUBSCRIBE's acknowledgement, `a{sv}`: the connection stays open, its events become unicast signals to the
    /// caller until it unsubscribes or leaves the bus.
    case subscription
    /// No request: the caller's subscription's connection is closed, `a{sv}` (empty) answers.
    case unsubscription
}

/// A call made into the socket's request.
public struct BusRequest: Equatable, Sendable {
    public var line: String
    /// What polkit must allow first (never asked for uid 0 or the daemon's own uid); nil: nothing.
    public var action: BusAction?
    public var shape: BusReplyShape

    public init(line: String, action: BusAction? = nil, shape: BusReplyShape = .object) {
        self.line = line; self.action = action; self.shape = shape
    }
}

/// Why a call is no request: the D-Bus errors it is answered with.
public enum BusRefusal: Error, Equatable, Sendable {
    case unknownMethod
    /// The arguments' types are not the method's, or a word is no word of the protocol (empty, spaces, controls, a
    /// leading `-`): names travel as one word of a line.
    case invalidArguments(String)
}

public enum BusMethod {
    /// Each method's input signature, by interface and member: what the introspection data says.
    public static let signatures: [String: [String: String]] = [
        BusNames.interface: ["GetStatus": "", "GetLinks": "", "Query": "", "QueryApp": "sb", "GetApps": "b",
                             "GetUsage": "sb", "GetPrompts": "b", "GetDecisions": "b", "Subscribe": "asb",
                             "Unsubscribe": "", "GetReport": "sb"],
        BusNames.decisions: ["Decide": "sssbb", "Forget": "ssb", "Answer": "usb", "Reload": "", "ResetReport": "sb",
                             "KeepReport": "b"],
    ]

    /// The request `member` of `interface` is, with `args` read as its signature says.
    public static func request(_ interface: String, _ member: String, _ args: [BusArgument]) throws(BusRefusal) -> BusRequest {
        switch interface {
        case BusNames.interface: return try reading(member, args)
        case BusNames.decisions: return try deciding(member, args)
        default: throw .unknownMethod
        }
    }

    private static func reading(_ member: String, _ a: [BusArgument]) throws(BusRefusal) -> BusRequest {
        let all = { (i: Int) -> BusAction? in flag(a, i) ? .readAll : nil }
        switch member {
        case "GetStatus": return BusRequest(line: "STATUS")
        case "GetLinks": return BusRequest(line: "LINKS", shape: .member("links"))
        case "Query": return BusRequest(line: "QUERY")
        case "QueryApp":
            let app = try word(a, 0, "app")
            // Everyone's view is QUERY's by name; one's own is the app of one's own list, as APPS has it.
            return flag(a, 1) ? BusRequest(line: "QUERY \(app)", action: .readAll) : BusRequest(line: "APPS", shape: .app(app))
        case "GetApps": return BusRequest(line: "APPS", action: all(0), shape: .member("apps"))
        case "GetUsage":
            let app = try word(a, 0, "app", optional: true)
            return BusRequest(line: app.isEmpty ? "USAGE" : "USAGE \(app)", action: all(1))
        case "GetPrompts": return BusRequest(line: "PROMPTS", action: all(0), shape: .member("prompts"))
        case "GetDecisions": return BusRequest(line: "DECISIONS", action: all(0), shape: .member("decisions"))
        case "Subscribe": return try subscribing(a)
        case "GetReport":
            // The engine's reply as it is (a{sv}): its members are PRIVACY.md's, not the face's to shape.
            let app = try word(a, 0, "app", optional: true)
            return BusRequest(line: app.isEmpty ? "REPORT" : "REPORT \(app)", action: all(1))
        case "Unsubscribe": return BusRequest(line: "", shape: .unsubscription)
        default: throw .unknownMethod
        }
    }

    /// The topics whose events are a caller's own (as its uid, or everyone's with read-all) and come as unicast
    /// signals. Links and the policy are everyone's: their signals are broadcast to all, subscribed or not.
    public static let subscriptionTopics: Set<String> = ["apps", "mine", "self", "usage", "prompts"]

    private static func subscribing(_ a: [BusArgument]) throws(BusRefusal) -> BusRequest {
        guard case let .strings(topics)? = a.first, !topics.isEmpty else { throw .invalidArguments("topics: expected some") }
        for t in topics where !subscriptionTopics.contains(t) {
            throw .invalidArguments("topics: \(SafeText.excerpt(t, maxBytes: 40)) is none of "
                + subscriptionTopics.sorted().joined(separator: ", ") + " (links and the policy are broadcast)")
        }
        return BusRequest(line: "SUBSCRIBE " + topics.joined(separator: " "), action: flag(a, 1) ? .readAll : nil,
                          shape: .subscription)
    }

    private static func deciding(_ member: String, _ a: [BusArgument]) throws(BusRefusal) -> BusRequest {
        switch member {
        case "Decide":
            let line = "DECIDE \(try word(a, 0, "app")) \(try word(a, 1, "kind")) \(try word(a, 2, "decision"))"
            return BusRequest(line: line + (flag(a, 3) ? " --once" : ""), action: flag(a, 4) ? .manage : .decideOwn)
        case "Forget":
            let kind = try word(a, 1, "kind", optional: true)
            return BusRequest(line: "FORGET \(try word(a, 0, "app"))" + (kind.isEmpty ? "" : " \(kind)"),
                              action: flag(a, 2) ? .manage : .decideOwn)
        case "Answer":
            guard case let .uint32(id)? = a.first else { throw .invalidArguments("id: expected a number") }
            let everyone = flag(a, 2)
            return BusRequest(line: "ANSWER \(id) \(try word(a, 1, "choice"))" + (everyone ? " --everyone" : ""),
                              action: everyone ? .manage : .decideOwn)
        case "Reload": return BusRequest(line: "RELOAD", action: .manage)
        // Clearing and keeping one's own report are changes to one's own, as deciding for oneself is.
        case "ResetReport":
            let app = try word(a, 0, "app", optional: true)
            return BusRequest(line: app.isEmpty ? "RESET-REPORT" : "RESET-REPORT \(app)",
                              action: flag(a, 1) ? .manage : .decideOwn)
        case "KeepReport":
            guard case let .bool(on)? = a.first else { throw .invalidArguments("keep: expected a boolean") }
            return BusRequest(line: "KEEP-REPORT " + (on ? "yes" : "no"), action: .decideOwn)
        default: throw .unknownMethod
        }
    }

    private static func flag(_ a: [BusArgument], _ i: Int) -> Bool {
        if i < a.count, case let .bool(b) = a[i] { return b }
        return false
    }

    /// Argument `i` as one word of a request line. `optional`: the empty string means "not given".
    private static func word(_ a: [BusArgument], _ i: Int, _ name: String, optional: Bool = false) throws(BusRefusal) -> String {
        guard i < a.count, case let .string(s) = a[i] else { throw .invalidArguments("\(name): expected a string") }
        if s.isEmpty && optional { return s }
        guard !s.isEmpty, s.utf8.count <= 256, s.utf8.first != UInt8(ascii: "-"),
              !s.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F }) else {
            throw .invalidArguments("\(name): not one word (\(SafeText.excerpt(s, maxBytes: 60)))")
        }
        return s
    }
}

extension ErrorCode {
    /// The D-Bus error a socket error code is: `org.netpermd.NetPerm1.Error.` and the code in CamelCase
    /// (`permission-denied` is `...Error.PermissionDenied`).
    public var busErrorName: String {
        BusNames.errorPrefix + rawValue.split(separator: "-").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
    }
}
