// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermControl
import NetpermCore
import NetpermHost
import NetpermIO
import NetpermPolicy
import NetpermProtocol

/// Who is at the other end of each connection, as the engine is told: each request is answered for the process that
/// sent it. The engine learns who that is before the first request, and again only when a request comes from another
/// pid than the last one did: the same sender costs a comparison, and a connection that sends nothing costs no
/// reading of /proc.
final class PeerConnections {
    /// Each open connection: its socket, who connected, and the pid the engine has the identity of (nil until its
    /// first request).
    private var connections: [ConnectionID: (fd: Int32, connector: Credentials, pid: Int32?)] = [:]
    private let identities = PeerIdentities()

    func opened(_ id: ConnectionID, fd: Int32, connector: Credentials) {
        connections[id] = (fd, connector, nil)
    }

    /// What the engine must hear before the request `sender` sent: that the connection is open (its first request),
    /// or that another process speaks on it; nil when nothing changed.
    func sending(_ id: ConnectionID, _ sender: Credentials) -> Input?? {
        guard let c = connections[id] else { return nil }
        guard c.pid != sender.pid else { return .some(nil) }
        let identity = identities.identify(sender: sender, socket: c.fd, connector: c.connector)
        connections[id]?.pid = sender.pid
        return .some(c.pid == nil ? .opened(id, identity) : .identityChanged(id, identity))
    }

    /// Whether the engine knew the connection (it sent a request).
    func closed(_ id: ConnectionID) -> Bool {
        guard let c = connections.removeValue(forKey: id) else { return false }
        return c.pid != nil
    }

    /// The process the bus daemon names as a call's sender, read from /proc.
    func busCaller(pid: Int32, uid: UInt32) -> PeerIdentity {
        identities.identify(busCaller: pid, uid: uid, authorized: false)
    }
}
