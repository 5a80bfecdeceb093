// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO
import NetpermSystemd

/// Makes the scopes the engine asks for apps found by what they run (Effect.makeScope): StartTransientUnit with
/// `PIDs=[pid]` on the user's own manager, over one connection per manager kept open on the loop
/// (UserManagerLinks), each answered once its start job is done or after `timeout` microseconds. The engine asks
/// for at most Engine.maxScopes at once.
public final class ScopeMaker {
    private let links: UserManagerLinks

    public init(loop: SDEventLoop, timeout: UInt64 = 5_000_000) {
        links = UserManagerLinks(loop: loop, timeoutMicroseconds: timeout)
    }

    public func make(_ request: ScopeRequest, done: @escaping (EdgeError?) -> Void) {
        let scope = UserManagerLinks.Scope(name: request.unit, pids: [UInt32(bitPattern: request.pid)],
                                           description: "\(request.app), found by what it runs (netpermd)",
                                           slice: "app.slice")
        links.start(scope, ofUser: request.uid) { failure in done(failure.map { EdgeError(.makeScope, "\($0)") }) }
    }
}
