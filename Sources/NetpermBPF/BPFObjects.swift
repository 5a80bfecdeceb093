import Glibc
import NetpermIO

/// `union bpf_attr` blocks, filled field by field (little-endian, as the kernel's x86-64 and arm64 ABIs are).
struct BPFAttr {
    var bytes: [UInt8]
    init(size: Int) { bytes = [UInt8](repeating: 0, count: size) }
    mutating func u32(_ offset: Int, _ v: UInt32) {
        for i in 0..<4 { bytes[offset + i] = UInt8(truncatingIfNeeded: v >> UInt32(8 * i)) }
    }
    mutating func u64(_ offset: Int, _ v: UInt64) {
        for i in 0..<8 { bytes[offset + i] = UInt8(truncatingIfNeeded: v >> UInt64(8 * i)) }
    }
    mutating func name(_ offset: Int, _ s: String) {
        for (i, c) in s.utf8.prefix(15).enumerated() { bytes[offset + i] = c }
    }
}

/// bpf(2) commands and constants used here (include/uapi/linux/bpf.h).
enum BPFCommand {
    static let mapCreate: Int32 = 0
    static let mapUpdateElem: Int32 = 2
    static let mapDeleteElem: Int32 = 3
    static let progLoad: Int32 = 5
    static let linkCreate: Int32 = 28
}

/// A hash map the program reads and the daemon writes. It lives as long as a descriptor or a program holds it:
/// the daemon's exit frees it.
public final class BPFHashMap {
    public let fd: Int32
    public let keySize: Int

    /// BPF_MAP_TYPE_HASH without preallocation: memory for the elements in use only (charged to the daemon's
    /// cgroup since Linux 5.11, so no RLIMIT_MEMLOCK is needed).
    public init(name: String, keySize: Int, valueSize: Int, maxEntries: UInt32) throws(Errno) {
        var a = BPFAttr(size: 72)
        a.u32(0, 1)                                 // BPF_MAP_TYPE_HASH
        a.u32(4, UInt32(keySize))
        a.u32(8, UInt32(valueSize))
        a.u32(12, maxEntries)
        a.u32(16, 1)                                // BPF_F_NO_PREALLOC
        a.name(28, name)
        fd = try BPFSyscall.call(BPFCommand.mapCreate, &a.bytes)
        self.keySize = keySize
    }

    deinit { FD.close(fd) }

    public func update(key: UInt64, value: UInt32) throws(Errno) {
        var k = Self.le(key, keySize)
        var v = Self.le(UInt64(value), 4)
        let r: Result<Int32, Errno> = k.withUnsafeMutableBytes { kb in
            v.withUnsafeMutableBytes { vb in
                var a = BPFAttr(size: 32)
                a.u32(0, UInt32(bitPattern: fd))
                a.u64(8, UInt64(UInt(bitPattern: kb.baseAddress)))
                a.u64(16, UInt64(UInt(bitPattern: vb.baseAddress)))
                return Result { () throws(Errno) -> Int32 in try BPFSyscall.call(BPFCommand.mapUpdateElem, &a.bytes) }
            }
        }
        _ = try r.get()   // BPF_ANY: added or replaced
    }

    /// Removes the element; one already absent is not an error.
    public func delete(key: UInt64) throws(Errno) {
        var k = Self.le(key, keySize)
        do {
            try k.withUnsafeMutableBytes { kb in
                Result { () throws(Errno) in
                    var a = BPFAttr(size: 32)
                    a.u32(0, UInt32(bitPattern: fd))
                    a.u64(8, UInt64(UInt(bitPattern: kb.baseAddress)))
                    try BPFSyscall.call(BPFCommand.mapDeleteElem, &a.bytes)
                }
            }.get()
        } catch where error.code == ENOENT {}
    }

    private static func le(_ v: UInt64, _ size: Int) -> [UInt8] {
        (0..<size).map { UInt8(truncatingIfNeeded: v >> UInt64(8 * $0)) }
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
        let sockCreate: UInt32 = 2                  // BPF_CGROUP_INET_SOCK_CREATE
        var license = Array("GPL".utf8) + [0]
        var log = [UInt8](repeating: 0, count: 16384)
        var insns = instructions
        let loaded: Result<Int32, Errno> = insns.withUnsafeMutableBytes { ib in
            license.withUnsafeMutableBytes { lb in
                log.withUnsafeMutableBytes { gb in
                    Result { () throws(Errno) -> Int32 in
                        var a = BPFAttr(size: 128)
                        a.u32(0, 9)                 // BPF_PROG_TYPE_CGROUP_SOCK
                        a.u32(4, UInt32(ib.count / 8))
                        a.u64(8, UInt64(UInt(bitPattern: ib.baseAddress)))
                        a.u64(16, UInt64(UInt(bitPattern: lb.baseAddress)))
                        a.u32(24, 1)                // log_level: the verifier says why, if it refuses
                        a.u32(28, UInt32(gb.count))
                        a.u64(32, UInt64(UInt(bitPattern: gb.baseAddress)))
                        a.name(48, name)
                        a.u32(68, sockCreate)       // expected_attach_type
                        return try BPFSyscall.call(BPFCommand.progLoad, &a.bytes)
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
        var a = BPFAttr(size: 32)
        a.u32(0, UInt32(bitPattern: prog))
        a.u32(4, UInt32(bitPattern: dir))
        a.u32(8, sockCreate)
        do { linkFD = try BPFSyscall.call(BPFCommand.linkCreate, &a.bytes) } catch {
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
