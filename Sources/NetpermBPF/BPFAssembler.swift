// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermIO

/// eBPF instructions as the kernel reads them (8 bytes each: opcode, registers, offset, immediate; little-endian),
/// assembled here: the one program netpermd loads is ~40 instructions, so neither clang nor libbpf is needed. The
/// opcodes are <linux/bpf.h>'s (`BPFABI`). Pure: bytes out, unit-tested on them.
public struct BPFAssembler {
    /// r0 (return value, helper result), r1-r5 (helper arguments), r6-r9 (kept across calls), r10 (frame pointer).
    public struct Register: Equatable, Sendable {
        public let number: UInt8
        public static let r0 = Register(number: 0), r1 = Register(number: 1), r2 = Register(number: 2)
        public static let r6 = Register(number: 6), r10 = Register(number: 10)
    }

    /// A place to jump to, bound once with `bind`.
    public struct Label: Hashable, Sendable { let id: Int }

    private(set) var words: [(code: UInt8, dst: UInt8, src: UInt8, off: Int16, imm: Int32)] = []
    private var labels: [Int: Int] = [:]
    private var fixups: [(at: Int, label: Int)] = []
    private var nextLabel = 0

    public init() {}

    public var count: Int { words.count }

    public mutating func label() -> Label {
        nextLabel += 1
        return Label(id: nextLabel)
    }

    public mutating func bind(_ l: Label) { labels[l.id] = words.count }

    private mutating func emit(_ code: UInt8, _ dst: Register = .r0, _ src: Register = .r0, off: Int16 = 0, imm: Int32 = 0) {
        words.append((code, dst.number, src.number, off, imm))
    }

    /// dst = src (64-bit).
    public mutating func mov(_ dst: Register, _ src: Register) { emit(BPFABI.mov64Register, dst, src) }
    /// dst = imm (64-bit, sign-extended).
    public mutating func mov(_ dst: Register, _ imm: Int32) { emit(BPFABI.mov64Immediate, dst, imm: imm) }
    /// dst += imm (64-bit).
    public mutating func add(_ dst: Register, _ imm: Int32) { emit(BPFABI.add64Immediate, dst, imm: imm) }
    /// dst = a 64-bit constant (two instruction slots).
    public mutating func load64(_ dst: Register, _ value: UInt64) {
        emit(BPFABI.loadImmediate64, dst, imm: Int32(bitPattern: UInt32(truncatingIfNeeded: value)))
        emit(0x00, imm: Int32(bitPattern: UInt32(truncatingIfNeeded: value >> 32)))
    }
    /// dst = the map whose descriptor is `fd` (BPF_PSEUDO_MAP_FD: the verifier turns it into the map's address).
    public mutating func loadMap(_ dst: Register, fd: Int32) {
        emit(BPFABI.loadImmediate64, dst, Register(number: BPFABI.pseudoMapFD), imm: fd)
        emit(0x00)
    }
    /// *(u64 *)(dst + off) = src.
    public mutating func store64(_ dst: Register, _ off: Int16, _ src: Register) { emit(BPFABI.store64, dst, src, off: off) }
    /// *(u32 *)(dst + off) = src.
    public mutating func store32(_ dst: Register, _ off: Int16, _ src: Register) { emit(BPFABI.store32, dst, src, off: off) }
    /// dst = *(u32 *)(src + off).
    public mutating func load32(_ dst: Register, _ src: Register, _ off: Int16) { emit(BPFABI.load32, dst, src, off: off) }
    /// A call of kernel helper number `helper`.
    public mutating func call(_ helper: Int32) { emit(BPFABI.call, imm: helper) }
    public mutating func exit() { emit(BPFABI.exit) }

    private mutating func jump(_ code: UInt8, _ dst: Register, _ src: Register, imm: Int32, to l: Label) {
        fixups.append((words.count, l.id))
        emit(code, dst, src, imm: imm)
    }
    /// goto l.
    public mutating func jump(to l: Label) { jump(BPFABI.jump, .r0, .r0, imm: 0, to: l) }
    /// if a != b goto l (64-bit, registers).
    public mutating func jumpIfNotEqual(_ a: Register, _ b: Register, to l: Label) {
        jump(BPFABI.jumpIfNotEqualRegister, a, b, imm: 0, to: l)
    }
    /// if a == imm goto l (64-bit).
    public mutating func jumpIfEqual(_ a: Register, _ imm: Int32, to l: Label) {
        jump(BPFABI.jumpIfEqualImmediate, a, .r0, imm: imm, to: l)
    }

    /// The program's bytes, jumps resolved (an offset counts instructions after the jump's own).
    public func bytes() -> [UInt8] {
        var w = words
        for f in fixups {
            guard let target = labels[f.label] else { preconditionFailure("BPF label never bound") }
            w[f.at].off = Int16(target - f.at - 1)
        }
        var out: [UInt8] = []
        out.reserveCapacity(w.count * 8)
        for i in w {
            out.append(i.code)
            out.append(i.src << 4 | i.dst)
            out.append(UInt8(truncatingIfNeeded: UInt16(bitPattern: i.off)))
            out.append(UInt8(truncatingIfNeeded: UInt16(bitPattern: i.off) >> 8))
            let imm = UInt32(bitPattern: i.imm)
            for s in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: imm >> UInt32(s))) }
        }
        return out
    }
}
