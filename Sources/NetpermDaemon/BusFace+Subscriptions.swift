// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermIO
import NetpermProtocol
import NetpermSystemd

/// A caller's own events on the bus (docs/DBUS.md, "Signals"): `Subscribe` opens a SUBSCRIBE of the engine's for the
/// caller, as the socket's would for the same process (the same topics, the same filtering by uid, everyone's view
/// only with polkit's read-all), and each of its events becomes a signal sent to the caller's unique name alone. A
/// unicast signal reaches nobody else whatever their match rules, so one user never hears another's apps, prompts
/// or budgets. The subscription ends with `Unsubscribe`, with the caller's connection to the bus, or when the face
/// reconnects to the bus.
extension BusFace {
    /// Subscriptions at once, and of one uid (each is a connection of the engine's, with its events held once).
    static let maxSubscriptions = 512
    static let maxSubscriptionsPerUID = 32

    /// Why `sender` may not subscribe now (nil: it may). Subscribing again replaces its subscription.
    func subscriptionRefusal(_ sender: String, uid: UInt32) -> String? {
        end(sender)
        if subscriptionOf.count >= Self.maxSubscriptions { return "netpermd holds \(Self.maxSubscriptions) subscriptions already" }
        if subscriptionOf.values.lazy.filter({ $0.uid == uid }).count >= Self.maxSubscriptionsPerUID {
            return "uid \(uid) holds \(Self.maxSubscriptionsPerUID) subscriptions already"
        }
        return nil
    }

    /// The engine acknowledged `call`'s SUBSCRIBE on connection `id`: the caller hears its events from now on (the
    /// snapshot comes right after this reply, as on the socket).
    func subscribed(_ id: UInt64, _ call: BusIncoming, _ ack: JSON) {
        let uid = callers[call.sender]?.uid ?? 0
        subscriptionOf[call.sender] = (id, uid)
        subscriberOf[id] = call.sender
        call.reply { BusJSON.appendObject($0, ack, skipping: "ok") }
        // Gone before the subscription was made (its NameOwnerChanged came first): the bus says it has no owner.
        bus.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner",
                 append: { BusMessage.append($0, "s", call.sender) }) { [weak self] result in
            if case .failure = result { self?.end(call.sender) }
        }
    }

    func unsubscribe(_ call: BusIncoming) {
        end(call.sender)
        call.reply { BusJSON.appendObject($0, .object([])) }
    }

    /// Closes `sender`'s subscription, if it has one.
    func end(_ sender: String) {
        guard let s = subscriptionOf.removeValue(forKey: sender) else { return }
        subscriberOf[s.id] = nil
        interpreter.busClosed(s.id)
    }

    /// A (re)connection to the bus: the last connection's subscribers are not on this one. Their leaving the bus is
    /// heard from now on (NameOwnerChanged of a unique name losing its owner).
    func connected() {
        for sender in Array(subscriptionOf.keys) { end(sender) }
        bus.subscribe("type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
            + "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg2=''", from: .bus) { [weak self] m in
            guard let self, let name = m.string(), name.hasPrefix(":") else { return }
            self.callers[name] = nil
            self.end(name)
        }
    }

    /// One of a subscriber's events as its signal, to it alone: the event's body as `a{sv}` (the socket's members
    /// but `event`; `seq` counts the subscription's events, so a gap means some were lost).
    func unicast(_ json: JSON, to sender: String) {
        guard case let .object(members) = json, let name = json["event"]?.stringValue else { return }
        let body = JSON.object(members.filter { $0.0 != "event" })
        let signal: (member: String, change: String?)
        switch name {
        case "app": signal = ("AppChanged", nil)
        case "usage": signal = ("UsageReached", nil)
        case "prompt", "prompt-expired", "prompt-answered", "prompt-withdrawn": signal = ("PromptChanged", name)
        case "snapshot": signal = ("Snapshot", "snapshot")
        case "resync": signal = ("Snapshot", json["why"]?.stringValue ?? "resync")
        case "unsubscribed": signal = ("Unsubscribed", nil)
        // Links and the policy are broadcast (never a caller's topic here); stopping: the name leaves the bus.
        default: return
        }
        service.emit(BusNames.interface, signal.member, to: sender) { m in
            var r: Int32 = 0
            if let change = signal.change { r = BusJSON.append(m, .string(change)) }
            if r >= 0 { r = BusJSON.appendObject(m, body) }
            return r
        }
    }
}
