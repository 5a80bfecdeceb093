// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO
import NetpermPolicy
import NetpermProtocol
import NetpermSystemd

/// What the interpreter hands a second transport: the engine's replies and events for its connections.
public protocol SecondTransport: AnyObject {
    func owns(_ id: UInt64) -> Bool
    func reply(_ id: UInt64, _ bytes: UnsafeRawBufferPointer)
    func event(_ id: UInt64, head: UnsafeRawBufferPointer, tail: UnsafeRawBufferPointer)
    /// The engine's queue is empty: signals gathered meanwhile go out, one of each.
    func flush()
}

/// The daemon's face on the system bus (docs/DBUS.md): a second transport of the socket's requests to the same
/// engine. Each call becomes a connection of its own in the engine, opened for the caller the bus daemon names
/// (GetConnectionCredentials of the sender's unique name: never a pid the caller gives), with `authorized` when
/// polkit allowed the call's action, sent one request line, and closed once its reply is back. Nothing waits on the
/// loop: the caller's credentials and polkit's answer come asynchronously, the call's message is held meanwhile.
/// The broadcast signals come from one more connection of the engine's, the daemon's own, subscribed to links, apps,
/// policy, usage and prompts (as an observer, no agent): what they carry is what every user may see (links, the
/// policy's generation), the rest is "changed". What only some may see goes to them alone: a caller's `Subscribe` is
/// a SUBSCRIBE of the engine's for that caller, whose events become unicast signals to its unique name
/// (BusFace+Subscriptions.swift).
public final class BusFace: SecondTransport {
    /// Connection ids of the bus, far above the socket's (which count up from 1).
    static let firstID: UInt64 = 1 << 48
    /// The connection whose events become signals.
    private static let subscriberID = firstID
    /// Calls held at once (waiting for credentials, polkit or the engine); past it a call is refused at once. Each
    /// caller's own bus limits it to 128 calls waiting for replies.
    static let maxHeld = 2048
    static let maxKnownCallers = 4096

    let service: BusService
    let bus: SystemBus
    unowned let interpreter: Interpreter
    private let daemonUID: UInt32
    var nextID = firstID + 1
    /// Calls handed to the engine, by connection id.
    var inEngine: [UInt64: (call: BusIncoming, shape: BusReplyShape)] = [:]
    /// Calls waiting for credentials or polkit.
    var preparing = 0
    /// Callers' subscriptions: the engine's connection of each, by the caller's unique name, and back.
    var subscriptionOf: [String: (id: UInt64, uid: UInt32)] = [:]
    var subscriberOf: [UInt64: String] = [:]
    private var subscribed = false
    /// Callers as the bus daemon named them (pid and uid), by unique name (never reused on one bus), identified
    /// once: a connection's process is the one that connected, as a socket connection's is until another pid writes
    /// on it.
    var callers: [String: PeerIdentity] = [:]
    private var callerLookups: [String: [(Result<PeerIdentity, BusCallError>) -> Void]] = [:]
    /// polkit checks in flight, by sender, action and interaction: a caller's calls share one.
    private var checks: [String: [(PolkitAnswer) -> Void]] = [:]
    private var pendingSignals: Set<String> = []

    public init(bus: SystemBus, interpreter: Interpreter, daemonUID: UInt32) {
        self.bus = bus; self.interpreter = interpreter; self.daemonUID = daemonUID
        service = BusService(bus: bus, name: BusNames.service, path: BusNames.path, methods: BusMethod.signatures,
                             introspection: BusInterface.introspection,
                             properties: [BusNames.interface: ["Version": NetpermVersion.version]])
        service.onCall = { [unowned self] in self.handle($0) }
        service.onConnect = { [unowned self] in
            callers = [:]
            connected()
            guard !subscribed else { return }
            subscribed = true
            interpreter.busRequest(Self.subscriberID, caller: interpreter.identifyBusCaller(pid: getpid(), uid: daemonUID),
                                   via: .busSignals, line: "SUBSCRIBE links apps policy usage prompts")
        }
    }

    /// Serves from now on: the interpreter must hand the face its connections' replies first.
    public func start() { service.start() }

    // MARK: - Calls

    private func handle(_ call: BusIncoming) {
        guard inEngine.count + preparing < Self.maxHeld else {
            return call.fail("org.freedesktop.DBus.Error.LimitsExceeded", "netpermd holds \(Self.maxHeld) calls already")
        }
        let request: BusRequest
        do {
            request = try BusMethod.request(call.interface, call.member, call.arguments)
        } catch {
            switch error {
            case .unknownMethod: return call.fail("org.freedesktop.DBus.Error.UnknownMethod", "no method \(call.member)")
            case let .invalidArguments(why): return call.fail("org.freedesktop.DBus.Error.InvalidArgs", why)
            }
        }
        if request.shape == .unsubscription { return unsubscribe(call) }
        preparing += 1
        caller(call.sender) { [unowned self] result in
            switch result {
            case let .failure(e):
                preparing -= 1
                call.fail("org.freedesktop.DBus.Error.Failed", "the bus did not say who called: \(e)")
            case let .success(who):
                authorize(call, request, uid: who.uid) { [unowned self] authorized in
                    preparing -= 1
                    guard let authorized else { return }
                    if request.shape == .subscription, let refusal = subscriptionRefusal(call.sender, uid: who.uid) {
                        return call.fail("org.freedesktop.DBus.Error.LimitsExceeded", refusal)
                    }
                    let id = nextID
                    nextID += 1
                    inEngine[id] = (call, request.shape)
                    interpreter.busRequest(id, caller: who, via: .bus(authorized: authorized), line: request.line)
                }
            }
        }
    }

    /// Whether the call may go on (nil: refused, and answered so), and with everyone's privilege or not. Root and
    /// the daemon's own uid need no polkit: they are privileged on the socket too.
    private func authorize(_ call: BusIncoming, _ request: BusRequest, uid: UInt32, _ go: @escaping (Bool?) -> Void) {
        guard let action = request.action, uid != 0, uid != daemonUID else { return go(false) }
        let key = "\(call.sender) \(action.rawValue) \(call.interactive)"
        let first = checks[key] == nil
        checks[key, default: []].append { answer in
            switch answer {
            case .authorized: go(action.grantsPrivilege)
            case .challenge:
                call.fail("org.freedesktop.DBus.Error.InteractiveAuthorizationRequired",
                          "\(action.rawValue) needs authentication: call again allowing interactive authorization")
                go(nil)
            case .denied:
                call.fail(ErrorCode.notAuthorizedBusName, "polkit does not allow \(action.rawValue) to this caller")
                go(nil)
            case let .unavailable(why):
                call.fail(ErrorCode.notAuthorizedBusName, "\(action.rawValue) needs polkit's authorization: \(why)")
                go(nil)
            }
        }
        guard first else { return }
        Polkit.check(bus: bus, sender: call.sender, action: action.rawValue, interactive: call.interactive) { [unowned self] answer in
            for waiter in checks.removeValue(forKey: key) ?? [] { waiter(answer) }
        }
    }

    /// The caller's pid and uid as the bus daemon recorded them when it connected.
    func caller(_ sender: String, _ done: @escaping (Result<PeerIdentity, BusCallError>) -> Void) {
        if let known = callers[sender] { return done(.success(known)) }
        let first = callerLookups[sender] == nil
        callerLookups[sender, default: []].append(done)
        guard first else { return }
        bus.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetConnectionCredentials",
                 append: { BusMessage.append($0, "s", sender) }) { [unowned self] result in
            let answer = result.flatMap { reply -> Result<PeerIdentity, BusCallError> in
                let p = reply.properties() ?? [:]
                guard let uid = p["UnixUserID"]?.uint32 else { return .failure(BusCallError(name: "NoUnixUserID", errno: EPROTO)) }
                return .success(interpreter.identifyBusCaller(pid: Int32(bitPattern: p["ProcessID"]?.uint32 ?? 0), uid: uid))
            }
            if case let .success(who) = answer {
                if callers.count >= Self.maxKnownCallers { callers = [:] }
                callers[sender] = who
            }
            for waiter in callerLookups.removeValue(forKey: sender) ?? [] { waiter(answer) }
        }
    }

    // MARK: - SecondTransport

    public func owns(_ id: UInt64) -> Bool { id >= Self.firstID }

    public func reply(_ id: UInt64, _ bytes: UnsafeRawBufferPointer) {
        guard let held = inEngine.removeValue(forKey: id) else {
            // A subscription's snapshot comes as a second reply, after the acknowledgement.
            if let sender = subscriberOf[id], let json = try? JSONParser.parse(String(decoding: bytes, as: UTF8.self)) {
                unicast(json, to: sender)
            }
            return
        }
        if held.shape != .subscription { interpreter.busClosed(id) }
        guard let json = try? JSONParser.parse(String(decoding: bytes, as: UTF8.self)) else {
            return held.call.fail("org.freedesktop.DBus.Error.Failed", "the daemon's answer could not be read")
        }
        guard json["ok"]?.boolValue == true else {
            if held.shape == .subscription { interpreter.busClosed(id) }
            let code = json["error"]?.stringValue.flatMap(ErrorCode.init(rawValue:))
            return held.call.fail(code?.busErrorName ?? BusNames.errorPrefix + "Failed", json["message"]?.stringValue ?? "failed")
        }
        switch held.shape {
        case .object: held.call.reply { BusJSON.appendObject($0, json, skipping: "ok") }
        case let .member(key): held.call.reply { BusJSON.appendObjects($0, json[key]) }
        case let .app(name):
            guard let app = json["apps"]?.arrayValue?.first(where: { $0["app"]?.stringValue == name }) else {
                return held.call.fail(ErrorCode.notFound.busErrorName, "no app \(SafeText.excerpt(name, maxBytes: 100)) among the caller's own")
            }
            held.call.reply { BusJSON.appendObject($0, app) }
        case .subscription: subscribed(id, held.call, json)
        case .unsubscription: held.call.reply { BusJSON.appendObject($0, .object([])) }
        }
    }

    public func event(_ id: UInt64, head: UnsafeRawBufferPointer, tail: UnsafeRawBufferPointer) {
        guard id == Self.subscriberID || subscriberOf[id] != nil,
              let json = try? JSONParser.parse(String(decoding: Array(head) + Array(tail), as: UTF8.self)) else { return }
        if let sender = subscriberOf[id] { return unicast(json, to: sender) }
        switch json["event"]?.stringValue {
        case "link":
            service.emit(BusNames.interface, "LinkChanged") { m in
                var r = BusJSON.append(m, json["change"] ?? .string("changed"))
                if r >= 0 { r = BusJSON.appendObject(m, json["link"] ?? .object([])) }
                return r
            }
        case "app": pendingSignals.insert("AppsChanged")
        case "usage": pendingSignals.insert("UsageChanged")
        case "prompt", "prompt-expired", "prompt-answered", "prompt-withdrawn": pendingSignals.insert("PromptsChanged")
        case "policy": emitPolicy(json)
        case "resync":
            for link in json["links"]?.arrayValue ?? [] {
                service.emit(BusNames.interface, "LinkChanged") { m in
                    var r = BusJSON.append(m, .string("changed"))
                    if r >= 0 { r = BusJSON.appendObject(m, link) }
                    return r
                }
            }
            if let policy = json["policy"] { emitPolicy(policy) }
            pendingSignals.formUnion(["AppsChanged", "PromptsChanged"])
        default: break
        }
    }

    private func emitPolicy(_ json: JSON) {
        let policy = JSON.object(["generation", "apps", "error"].compactMap { k in json[k].map { (k, $0) } })
        service.emit(BusNames.interface, "PolicyChanged") { BusJSON.appendObject($0, policy) }
    }

    public func flush() {
        guard !pendingSignals.isEmpty else { return }
        for member in pendingSignals.sorted() { service.emit(BusNames.interface, member) }
        pendingSignals = []
    }
}

extension ErrorCode {
    /// A call polkit did not allow (or could not be asked about): no socket error is it.
    static let notAuthorizedBusName = BusNames.errorPrefix + "NotAuthorized"
}
