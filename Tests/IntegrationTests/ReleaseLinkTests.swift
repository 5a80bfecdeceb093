// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest

/// The release programs' read-only data is read-only (toolchain/rodata.ld): the compiler marks some `.rodata` input
/// sections writable, and merged as one they made all of it writable, kept resident after start-up (the release of
/// start-up's pages takes only read-only mappings) and open to writes. Read from the ELF headers of what
/// `make install` ships.
final class ReleaseLinkTests: IntegrationTestCase {
    func testTheReadOnlyDataIsInNoWritableSegment() throws {
        guard let dir = ProcessInfo.processInfo.environment["NETPERMD_RELEASE_BIN"], !dir.isEmpty else {
            throw XCTSkip("checks the release link: NETPERMD_RELEASE_BIN names its directory (make test sets it)")
        }
        for program in ["netpermd", "netpermctl"] {
            let elf = try ELFHeaders(path: dir + "/" + program)
            let rodata = try XCTUnwrap(elf.sections.first { $0.name == ".rodata" }, "\(program) has a .rodata")
            XCTAssertEqual(rodata.flags & ELFHeaders.shfWrite, 0, "\(program): .rodata is not writable")
            XCTAssertGreaterThan(rodata.size, 500_000, "\(program): the read-only data is in .rodata")
            let writable = elf.loads.filter { $0.flags & ELFHeaders.pfWrite != 0 }
            XCTAssertFalse(writable.contains { $0.vaddr < rodata.addr + rodata.size && rodata.addr < $0.vaddr + $0.memsz },
                           "\(program): no writable segment holds .rodata")
        }
    }
}

/// The section and loadable segment headers of a little-endian 64-bit ELF file.
private struct ELFHeaders {
    static let shfWrite: UInt64 = 0x1
    static let pfWrite: UInt32 = 0x2
    struct Section { var name: String; var flags: UInt64; var addr: UInt64; var size: UInt64 }
    struct Load { var flags: UInt32; var vaddr: UInt64; var memsz: UInt64 }
    var sections: [Section] = []
    var loads: [Load] = []

    init(path: String) throws {
        let b = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        guard b.count > 64, b[0..<4] == [0x7F, 0x45, 0x4C, 0x46], b[4] == 2, b[5] == 1 else {
            throw HarnessError("\(path) is not a little-endian 64-bit ELF file")
        }
        func u16(_ at: Int) -> Int { Int(b[at]) | Int(b[at + 1]) << 8 }
        func u32(_ at: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(b[at + $1]) << (8 * $1) } }
        func u64(_ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(b[at + $1]) << (8 * $1) } }
        let (phoff, phsize, phnum) = (Int(u64(0x20)), u16(0x36), u16(0x38))
        for i in 0..<phnum where u32(phoff + i * phsize) == 1 {   // PT_LOAD
            let p = phoff + i * phsize
            loads.append(Load(flags: u32(p + 4), vaddr: u64(p + 16), memsz: u64(p + 40)))
        }
        let (shoff, shsize, shnum, shstrndx) = (Int(u64(0x28)), u16(0x3A), u16(0x3C), u16(0x3E))
        let names = Int(u64(shoff + shstrndx * shsize + 24))
        for i in 0..<shnum {
            let s = shoff + i * shsize
            var n = names + Int(u32(s))
            var name: [UInt8] = []
            while b[n] != 0 { name.append(b[n]); n += 1 }
            sections.append(Section(name: String(decoding: name, as: UTF8.self), flags: u64(s + 8), addr: u64(s + 16),
                                    size: u64(s + 32)))
        }
    }
}
