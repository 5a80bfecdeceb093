// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux
import Glibc

/// bpf(2), through the chokepoint: each command's `union bpf_attr` member filled by name, as <linux/bpf.h> lays it
/// out (through CLinux), never by offset. What steering (NetpermBPF) needs: hash maps, one program, its bpf_link.
public enum BPFSyscall {
    /// BPF_MAP_CREATE of a BPF_MAP_TYPE_HASH without preallocation (memory for the elements in use only, charged to
    /// the daemon's cgroup since Linux 5.11, so no RLIMIT_MEMLOCK is needed); its descriptor.
    public static func createHashMap(name: String, keySize: Int, valueSize: Int, maxEntries: UInt32) throws(Errno) -> Int32 {
        var a = bpf_attr()
        a.map_type = BPF_MAP_TYPE_HASH.rawValue
        a.key_size = UInt32(keySize)
        a.value_size = UInt32(valueSize)
        a.max_entries = maxEntries
        a.map_flags = UInt32(BPF_F_NO_PREALLOC)
        withUnsafeMutableBytes(of: &a.map_name) { copyName(name, into: $0) }
        return try call(BPF_MAP_CREATE, &a)
    }

    /// BPF_MAP_UPDATE_ELEM with BPF_ANY: added or replaced.
    public static func updateElement(map fd: Int32, key: UnsafeRawPointer, value: UnsafeRawPointer) throws(Errno) {
        var a = bpf_attr()
        a.map_fd = UInt32(bitPattern: fd)
        a.key = UInt64(UInt(bitPattern: key))
        a.value = UInt64(UInt(bitPattern: value))
        a.flags = UInt64(BPF_ANY)
        try call(BPF_MAP_UPDATE_ELEM, &a)
    }

    /// BPF_MAP_DELETE_ELEM (ENOENT: there was none).
    public static func deleteElement(map fd: Int32, key: UnsafeRawPointer) throws(Errno) {
        var a = bpf_attr()
        a.map_fd = UInt32(bitPattern: fd)
        a.key = UInt64(UInt(bitPattern: key))
        try call(BPF_MAP_DELETE_ELEM, &a)
    }

    /// BPF_PROG_LOAD of a BPF_PROG_TYPE_CGROUP_SOCK program for BPF_CGROUP_INET_SOCK_CREATE, named `name` (what
    /// `bpftool prog` shows); the verifier writes why it refuses into `log`.
    public static func loadSockCreateProgram(name: String, instructions: UnsafeRawBufferPointer, license: UnsafeRawPointer,
                                             log: UnsafeMutableRawBufferPointer) throws(Errno) -> Int32 {
        var a = bpf_attr()
        a.prog_type = BPF_PROG_TYPE_CGROUP_SOCK.rawValue
        a.insn_cnt = UInt32(instructions.count / MemoryLayout<bpf_insn>.size)
        a.insns = UInt64(UInt(bitPattern: instructions.baseAddress))
        a.license = UInt64(UInt(bitPattern: license))
        a.log_level = 1
        a.log_size = UInt32(log.count)
        a.log_buf = UInt64(UInt(bitPattern: log.baseAddress))
        withUnsafeMutableBytes(of: &a.prog_name) { copyName(name, into: $0) }
        a.expected_attach_type = BPF_CGROUP_INET_SOCK_CREATE.rawValue
        return try call(BPF_PROG_LOAD, &a)
    }

    /// BPF_LINK_CREATE attaching a sock_create program to the cgroup directory `cgroup`: the attachment lasts as
    /// long as the returned descriptor.
    public static func attachSockCreate(program: Int32, cgroup: Int32) throws(Errno) -> Int32 {
        var a = bpf_attr()
        a.link_create.prog_fd = UInt32(bitPattern: program)
        a.link_create.target_fd = UInt32(bitPattern: cgroup)
        a.link_create.attach_type = BPF_CGROUP_INET_SOCK_CREATE.rawValue
        return try call(BPF_LINK_CREATE, &a)
    }

    /// The cookie of the daemon's network namespace (`SO_NETNS_COOKIE` on a socket of its own): what a program
    /// compares `bpf_get_netns_cookie()` with to act in this namespace only.
    public static func netnsCookie() throws(Errno) -> UInt64 {
        let fd = try sys { socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        defer { close(fd) }
        var cookie: UInt64 = 0
        var length = socklen_t(MemoryLayout<UInt64>.size)
        _ = try sys { getsockopt(fd, SOL_SOCKET, NP_SO_NETNS_COOKIE, &cookie, &length) }
        return cookie
    }

    @discardableResult
    private static func call(_ command: bpf_cmd, _ attr: inout bpf_attr) throws(Errno) -> Int32 {
        let r = try sys { np_bpf(Int32(command.rawValue), &attr, UInt32(MemoryLayout<bpf_attr>.size)) }
        return Int32(truncatingIfNeeded: r)
    }

    /// An object's name: at most BPF_OBJ_NAME_LEN - 1 bytes, NUL-terminated (the attribute block starts zeroed).
    private static func copyName(_ name: String, into b: UnsafeMutableRawBufferPointer) {
        for (i, c) in name.utf8.prefix(b.count - 1).enumerated() { b[i] = c }
    }
}

/// What an eBPF program is made of, from <linux/bpf.h> and <linux/bpf_common.h>: the opcodes the assembler
/// writes, the helpers the steering program calls and the one field of its context it sets.
public enum BPFABI {
    public static let mov64Register = UInt8(BPF_ALU64 | BPF_MOV | BPF_X)
    public static let mov64Immediate = UInt8(BPF_ALU64 | BPF_MOV | BPF_K)
    public static let add64Immediate = UInt8(BPF_ALU64 | BPF_ADD | BPF_K)
    /// Two instruction slots: a 64-bit immediate, or (source register BPF_PSEUDO_MAP_FD) a map.
    public static let loadImmediate64 = UInt8(BPF_LD | BPF_DW | BPF_IMM)
    public static let pseudoMapFD = UInt8(BPF_PSEUDO_MAP_FD)
    public static let store64 = UInt8(BPF_STX | BPF_MEM | BPF_DW)
    public static let store32 = UInt8(BPF_STX | BPF_MEM | BPF_W)
    public static let load32 = UInt8(BPF_LDX | BPF_MEM | BPF_W)
    public static let call = UInt8(BPF_JMP | BPF_CALL)
    public static let exit = UInt8(BPF_JMP | BPF_EXIT)
    public static let jump = UInt8(BPF_JMP | BPF_JA)
    public static let jumpIfNotEqualRegister = UInt8(BPF_JMP | BPF_JNE | BPF_X)
    public static let jumpIfEqualImmediate = UInt8(BPF_JMP | BPF_JEQ | BPF_K)

    public static let helperMapLookupElem = Int32(BPF_FUNC_map_lookup_elem.rawValue)
    public static let helperGetCurrentUIDGID = Int32(BPF_FUNC_get_current_uid_gid.rawValue)
    public static let helperGetNetnsCookie = Int32(BPF_FUNC_get_netns_cookie.rawValue)
    public static let helperGetCurrentAncestorCgroupID = Int32(BPF_FUNC_get_current_ancestor_cgroup_id.rawValue)

    /// `struct bpf_sock`'s `mark` (u32), writable at socket creation.
    public static let sockMarkOffset = Int16(MemoryLayout<bpf_sock>.offset(of: \.mark)!)
}
