// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermIO

/// The `cgroup/sock_create` program of Mode=steer (docs/ENFORCEMENT.md, "Steer"): at a socket's creation, in the
/// daemon's own network namespace only, it sets the socket's mark from the creating task's unit cgroup (deepest
/// level first), else from its uid, so the kernel's routing rules send the socket to its app's table. It always
/// allows the socket: rejecting is nft's job.
public enum SteerProgram {
    /// The cgroup levels looked up, deepest first (a unit in a slice below a slice before one directly in a
    /// top-level slice, as the nft rules). Every level, because the helper counts from the hierarchy's real root,
    /// while the daemon, in a cgroup namespace (a container), sees its units a few levels higher; cgroup ids are
    /// unique, so a level too deep or too shallow finds nothing.
    public static let levels = Array((1...12).reversed())

    /// `cookie`: the daemon's network namespace's; `levels`: the cgroup levels to look up, deepest first; `cgroupMap`: u64 cgroup id -> u32 mark (0: the unit's app is not steered, and its
    /// uid is not consulted); `uidMap`: u32 uid -> u32 mark.
    public static func instructions(cookie: UInt64, levels: [Int], cgroupMap: Int32, uidMap: Int32) -> [UInt8] {
        var a = BPFAssembler()
        let out = a.label()
        a.mov(.r6, .r1)                         // r6 = ctx (struct bpf_sock *), kept across calls
        a.call(BPFABI.helperGetNetnsCookie)     // r0 = the socket's namespace cookie (r1 = ctx)
        a.load64(.r1, cookie)
        a.jumpIfNotEqual(.r0, .r1, to: out)     // another namespace (the host's, a container's): untouched
        for level in levels {
            let next = a.label()
            a.mov(.r1, Int32(level))
            // 0 when the task's cgroup is not that deep: no element has id 0.
            a.call(BPFABI.helperGetCurrentAncestorCgroupID)
            a.store64(.r10, -8, .r0)
            // A unit's app decides: its uid is not consulted.
            markFromMap(&a, cgroupMap, key: -8, notFound: next, then: out)
            a.bind(next)
        }
        a.call(BPFABI.helperGetCurrentUIDGID)   // uid in the low 32 bits
        a.store32(.r10, -4, .r0)
        markFromMap(&a, uidMap, key: -4, notFound: out, then: nil)
        a.bind(out)
        a.mov(.r0, 1)                           // allow
        a.exit()
        return a.bytes()
    }

    /// Looks the key at r10 + `key` up in `map`; not found: on to `notFound`; found: the socket's mark is the
    /// element's, then on to `then` (nil: the next instruction).
    private static func markFromMap(_ a: inout BPFAssembler, _ map: Int32, key: Int32, notFound: BPFAssembler.Label,
                                    then: BPFAssembler.Label?) {
        a.loadMap(.r1, fd: map)
        a.mov(.r2, .r10)
        a.add(.r2, key)
        a.call(BPFABI.helperMapLookupElem)
        a.jumpIfEqual(.r0, 0, to: notFound)
        a.load32(.r1, .r0, 0)
        a.store32(.r6, BPFABI.sockMarkOffset, .r1)
        if let then { a.jump(to: then) }
    }
}
