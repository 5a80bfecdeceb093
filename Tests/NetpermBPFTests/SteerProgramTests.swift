// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermBPF
import NetpermIO
import XCTest

final class SteerProgramTests: XCTestCase {
    /// The encoding of each instruction kind the program uses, byte for byte (opcode, dst | src << 4, offset,
    /// immediate, little-endian), jumps resolved forward.
    func testAssemblerBytes() {
        var a = BPFAssembler()
        let out = a.label()
        a.mov(.r6, .r1)
        a.call(122)
        a.load64(.r1, 0x1122_3344_5566_7788)
        a.jumpIfNotEqual(.r0, .r1, to: out)
        a.loadMap(.r1, fd: 7)
        a.store64(.r10, -8, .r0)
        a.jumpIfEqual(.r0, 0, to: out)
        a.load32(.r1, .r0, 0)
        a.store32(.r6, 16, .r1)
        a.bind(out)
        a.mov(.r0, 1)
        a.exit()
        let expected: [[UInt8]] = [
            [0xBF, 0x16, 0, 0, 0, 0, 0, 0],
            [0x85, 0x00, 0, 0, 122, 0, 0, 0],
            [0x18, 0x01, 0, 0, 0x88, 0x77, 0x66, 0x55],
            [0x00, 0x00, 0, 0, 0x44, 0x33, 0x22, 0x11],
            [0x5D, 0x10, 6, 0, 0, 0, 0, 0],           // to `out`, 6 instructions on
            [0x18, 0x11, 0, 0, 7, 0, 0, 0],           // src 1: BPF_PSEUDO_MAP_FD
            [0x00, 0x00, 0, 0, 0, 0, 0, 0],
            [0x7B, 0x0A, 0xF8, 0xFF, 0, 0, 0, 0],     // *(u64 *)(r10 - 8) = r0
            [0x15, 0x00, 2, 0, 0, 0, 0, 0],
            [0x61, 0x01, 0, 0, 0, 0, 0, 0],
            [0x63, 0x16, 16, 0, 0, 0, 0, 0],
            [0xB7, 0x00, 0, 0, 1, 0, 0, 0],
            [0x95, 0x00, 0, 0, 0, 0, 0, 0],
        ]
        XCTAssertEqual(a.bytes(), expected.flatMap { $0 })
    }

    /// The program's shape: the namespace check first, one lookup per level, then the uid; it ends allowing.
    func testProgramShape() {
        let one = SteerProgram.instructions(cookie: 5, levels: [2], cgroupMap: 3, uidMap: 4)
        let two = SteerProgram.instructions(cookie: 5, levels: [3, 2], cgroupMap: 3, uidMap: 4)
        XCTAssertEqual(two.count - one.count, 12 * 8, "12 instructions per cgroup level")
        XCTAssertEqual(Array(two.suffix(16)), [0xB7, 0, 0, 0, 1, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0])
        XCTAssertLessThan(two.count / 8, 64)
    }

    /// The kernel's verifier accepts the program, and it attaches (to a cgroup of the test's own, never the
    /// hierarchy's root). Root only.
    func testKernelAcceptsAndAttaches() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root") }
        guard let info = try? String(decoding: Files.read("/proc/self/mountinfo"), as: UTF8.self),
              let mp = info.split(separator: "\n").lazy.compactMap({ line -> String? in
                  let h = line.split(separator: " - ", maxSplits: 1)
                  guard h.count == 2, h[1].hasPrefix("cgroup2 ") else { return nil }
                  return String(h[0].split(separator: " ")[4])
              }).first else { throw XCTSkip("no cgroup v2 hierarchy") }
        let dir = mp + "/netperm-bpftest-\(getpid())"
        XCTAssertEqual(mkdir(dir, 0o755), 0)
        defer { rmdir(dir) }
        let cookie = try BPFSyscall.netnsCookie()
        XCTAssertNotEqual(cookie, 0)
        let cg = try BPFHashMap(name: "np_test_cg", keySize: 8, valueSize: 4, maxEntries: 16)
        let uid = try BPFHashMap(name: "np_test_uid", keySize: 4, valueSize: 4, maxEntries: 16)
        try cg.update(key: 42, value: 0x6E70_0001)
        try uid.update(key: 4001, value: 0x6E70_0002)
        try uid.delete(key: 4001)
        try uid.delete(key: 4001)
        let program = SteerProgram.instructions(cookie: cookie, levels: [3, 2], cgroupMap: cg.fd, uidMap: uid.fd)
        do {
            let link = try BPFCgroupLink(name: "netpermd_test", instructions: program, cgroup: dir)
            XCTAssertGreaterThan(link.linkFD, 0)
        } catch {
            XCTFail("\(error)")
        }
    }
}
