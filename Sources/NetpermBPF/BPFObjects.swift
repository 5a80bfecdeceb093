// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO

/// A hash map the program reads and the daemon writes. It lives as long as a descriptor or a program holds it:
/// the daemon's exit frees it.
public final class BPFHashMap {
    public let fd: Int32
    public let keySize: Int

    /// A hash map without preallocation (`BPFSyscall.createHashMap`).
    public init(name: String, keySize: Int, valueSize: Int, maxEntries: UInt32) throws(Errno) {
        fd = try BPFSyscall.createHashMap(name: name, keySize: keySize, valueSize: valueSize, maxEntries: maxEntries)
        self.keySize = keySize
    }

    deinit { FD.close(fd) }

    /// Adds or replaces the element.
    public func update(key: UInt64, value: UInt32) throws(Errno) {
        let k = Self.bytes(key, keySize), v = Self.bytes(UInt64(value), 4)
        try k.withUnsafeBytes { kb in
            v.withUnsafeBytes { vb in
                Result { () throws(Errno) in try BPFSyscall.updateElement(map: fd, key: kb.baseAddress!, value: vb.baseAddress!) }
            }
        }.get()
    }

    /// Removes the element; one already absent is not an error.
    public func delete(key: UInt64) throws(Errno) {
        let k = Self.bytes(key, keySize)
        do {
            try k.withUnsafeBytes { kb in
                Result { () throws(Errno) in try BPFSyscall.deleteElement(map: fd, key: kb.baseAddress!) }
            }.get()
        } catch where error.code == ENOENT {}
    }

    /// A key or value of `size` bytes in host order, as the program reads it (u32 uid, u64 cgroup id).
    private static func bytes(_ v: UInt64, _ size: Int) -> [UInt8] {
        size == 4 ? withUnsafeBytes(of: UInt32(truncatingIfNeeded: v)) { Array($0) } : withUnsafeBytes(of: v) { Array($0) }
    }
}

/// A loaded program attached to a cgroup through a bpf_link: the attachment ends when the link's descriptor is
/// closed, so a daemon that exits, however it exits, leaves no program behind.
public final class BPFCgroupLink {
    public let programFD: Int32
    public let linkFD: Int32

    /// Loads `instructions` as a BPF_PROG_TYPE_CGROUP_SOCK program for BPF_CGROUP_INET_SOCK_CREATE, named `name`
    /// (what `bpftool prog` shows), and attaches it to the cgroup directory `cgroup`. A refusal by the verifier
    /// carries the verifier's log.
    public init(name: String, instructions: [UInt8], cgroup: String) throws(BPFError) {
        let license = Array("GPL".utf8) + [0]
        var log = [UInt8](repeating: 0, count: 16384)
        let loaded: Result<Int32, Errno> = instructions.withUnsafeBytes { ib in
            license.withUnsafeBytes { lb in
                log.withUnsafeMutableBytes { gb in
                    Result { () throws(Errno) -> Int32 in
                        try BPFSyscall.loadSockCreateProgram(name: name, instructions: ib, license: lb.baseAddress!, log: gb)
                    }
                }
            }
        }
        let prog: Int32
        switch loaded {
        case let .success(fd): prog = fd
        case let .failure(e):
            let text = String(decoding: log.prefix { $0 != 0 }.suffix(600), as: UTF8.self)
            throw BPFError(operation: "loading the program", errno: e, detail: text)
        }
        let dir: Int32
        do { dir = try sys { open(cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC) } } catch {
            FD.close(prog)
            throw BPFError(operation: "opening \(cgroup)", errno: error, detail: "")
        }
        defer { FD.close(dir) }
        do { linkFD = try BPFSyscall.attachSockCreate(program: prog, cgroup: dir) } catch {
            FD.close(prog)
            throw BPFError(operation: "attaching the program to \(cgroup)", errno: error, detail: "")
        }
        programFD = prog
    }

    deinit {
        FD.close(linkFD)
        FD.close(programFD)
    }
}

public struct BPFError: Error, CustomStringConvertible, Sendable {
    public var operation: String
    public var errno: Errno
    /// The verifier's log (its end) when it refused the program.
    public var detail: String
    public var description: String {
        "\(operation): \(errno)" + (detail.isEmpty ? "" : " (verifier: \(detail))")
    }
}
