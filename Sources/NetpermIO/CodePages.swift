// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux
import Glibc

/// Most of a freshly started daemon's RSS is pages of its binary and libraries that only start-up ran or read
/// (the loader, option and policy parsing, the first netlink dump), and the kernel maps them in 64 KiB windows
/// around each page fault, so even code that runs once keeps its neighbours resident. `release()` unmaps, once,
/// every page of the process's code and read-only data: what a running daemon needs comes back on first use, and
/// (where the kernel allows it, `faultsOnePage`) one page at a time instead of a window.
public enum CodePages {
    /// Unmaps (`MADV_DONTNEED`) every mapping that is a private, readable, never-writable view of a file and holds
    /// only that file's bytes: no anonymous (copy-on-write) page and nothing swapped, per /proc/self/smaps. That
    /// is the code (`r-xp`) and read-only data (`r--p`) of the binary and its libraries. Their pages stay in the
    /// page cache; the next instruction or read that needs one maps it again with a minor fault. Writable mappings
    /// are never touched, and neither are RELRO ones: the loader wrote their relocations into private anonymous
    /// pages before making them read-only, and dropping those pages would bring back the file's unrelocated bytes.
    ///
    /// Each of those mappings is also registered with `pageByPage`, which turns the kernel's fault-around off for
    /// it: without that, the request path's code, spread over the binary, came back as ~85 windows of 64 KiB
    /// (5.4 MiB) for some hundreds of KiB it runs. Returns the kB unmapped.
    @discardableResult
    public static func release() -> Int {
        guard let mappings = SmapsScan.ofSelf() else { return 0 }
        var released = 0, onePage = 0
        for m in mappings {
            if (try? sys { madvise(UnsafeMutableRawPointer(bitPattern: m.start), m.end - m.start, MADV_DONTNEED) }) != nil {
                released += m.rssKB
            }
            if let fd = pageByPage,
               (try? sys { np_userfaultfd_register_wp(fd, UInt(m.start), UInt(m.end - m.start)) }) != nil {
                onePage += 1
            }
        }
        Log.debug("released \(released) kB of code and read-only data pages of \(mappings.count) mappings"
                  + (pageByPage == nil ? "" : ", \(onePage) of them faulting one page at a time"))
        return released
    }

    /// Whether `release()` turns fault-around off: false where the kernel has no asynchronous write-protect mode
    /// for a file's mappings (before Linux 6.7) or a seccomp filter refuses userfaultfd(2).
    public static var faultsOnePage: Bool { pageByPage != nil }

    /// A userfaultfd in asynchronous write-protect mode, open for the life of the process: registration ends when
    /// it closes. Nothing is ever write-protected through it and nothing is read from it; registering a mapping
    /// with it is what tells the kernel to map only the faulting page (shim.h). One for all calls: a range
    /// registered with one userfaultfd cannot be registered with another (EBUSY).
    private static let pageByPage: Int32? = {
        do {
            return try sys { np_userfaultfd_wp_async() }
        } catch {
            Log.info("code pages will come back in 64 KiB windows: userfaultfd: \(error)")
            return nil
        }
    }()
}

/// Picks the releasable mappings out of /proc/self/smaps, read as bytes a fixed buffer at a time: Strings of its
/// ~64 kB left the heap 170 kB larger for good.
struct SmapsScan {
    struct Mapping: Equatable { var start = 0, end = 0, rssKB = 0 }

    private var releasable: [Mapping] = []
    /// The mapping being read, while it can still qualify.
    private var current: Mapping?
    private var anonymousKB = 0, swapKB = 0, locked = false
    /// The start of the current line; the rest of a longer line (a long path) is not needed.
    private var line: [UInt8] = []
    private static let lineLimit = 256

    /// The mappings of this process that `CodePages.release()` may unmap, or nil if smaps cannot be read.
    static func ofSelf() -> [Mapping]? {
        guard let fd = try? sys({ open("/proc/self/smaps", O_RDONLY | O_CLOEXEC) }) else { return nil }
        defer { FD.close(fd) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16384, alignment: 8)
        defer { buffer.deallocate() }
        var scan = SmapsScan()
        while true {
            guard let r = try? FD.read(fd, into: buffer) else { return nil }
            guard case let .bytes(n) = r else { break }
            scan.feed(buffer[0..<n])
        }
        return scan.end()
    }

    init() {
        releasable.reserveCapacity(64)
        line.reserveCapacity(Self.lineLimit)
    }

    mutating func feed<Bytes: Sequence<UInt8>>(_ bytes: Bytes) {
        for byte in bytes {
            if byte == UInt8(ascii: "\n") {
                take()
                line.removeAll(keepingCapacity: true)
            } else if line.count < Self.lineLimit {
                line.append(byte)
            }
        }
    }

    /// The releasable mappings, once all of smaps was fed.
    mutating func end() -> [Mapping] {
        take()
        line.removeAll(keepingCapacity: true)
        finish()
        return releasable
    }

    private mutating func take() {
        guard let first = line.first else { return }
        // Mapping headers start with a lowercase hex address, field lines with a capitalised key.
        if (first >= UInt8(ascii: "0") && first <= UInt8(ascii: "9")) || (first >= UInt8(ascii: "a") && first <= UInt8(ascii: "f")) {
            finish()
            current = Self.header(line)
            anonymousKB = 0; swapKB = 0; locked = false
        } else if current != nil {
            if line.starts(with: "Rss:".utf8) { current!.rssKB = Self.number(line) }
            else if line.starts(with: "Anonymous:".utf8) { anonymousKB = Self.number(line) }
            else if line.starts(with: "Swap:".utf8) { swapKB = Self.number(line) }
            else if line.starts(with: "VmFlags:".utf8) { locked = Self.words(line).contains { $0.elementsEqual("lo".utf8) } }
        }
    }

    /// The mapping just read qualifies if something of it is resident, none of it was ever written, and it is
    /// not locked (MADV_DONTNEED refuses locked mappings). "Never written" is Anonymous (copy-on-write copies,
    /// RELRO's relocations, a debugger's breakpoints) and Swap (such copies swapped out), not Private_Dirty:
    /// that also counts the dirty page cache of a file just written, such as a freshly linked binary.
    private mutating func finish() {
        if let m = current, m.rssKB > 0, anonymousKB == 0, swapKB == 0, !locked { releasable.append(m) }
        current = nil
    }

    /// `start-end perms offset dev inode path`: a mapping that can qualify, or nil.
    private static func header(_ line: [UInt8]) -> Mapping? {
        let w = words(line)
        guard w.count >= 6 else { return nil }
        // Readable, not writable, private (r-xp code, r--p data); of a file (an inode and an absolute path, so
        // not [vdso] and the like).
        let perms = Array(w[1])
        guard perms.count == 4, perms[0] == UInt8(ascii: "r"), perms[1] == UInt8(ascii: "-"),
              perms[3] == UInt8(ascii: "p"), !w[4].elementsEqual("0".utf8), w[5].first == UInt8(ascii: "/"),
              let dash = w[0].firstIndex(of: UInt8(ascii: "-")),
              let start = hex(w[0][..<dash]), let end = hex(w[0][(dash + 1)...]), start < end
        else { return nil }
        return Mapping(start: start, end: end, rssKB: 0)
    }

    private static func words(_ line: [UInt8]) -> [ArraySlice<UInt8>] {
        line.split(separator: UInt8(ascii: " "))
    }

    private static func hex(_ digits: ArraySlice<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count < 16 else { return nil }
        var v = 0
        for d in digits {
            switch d {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = v << 4 | Int(d - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): v = v << 4 | Int(d - UInt8(ascii: "a") + 10)
            default: return nil
            }
        }
        return v
    }

    /// The kB figure of `Key:   123 kB`.
    private static func number(_ line: [UInt8]) -> Int {
        var v = 0
        for d in line.drop(while: { $0 != UInt8(ascii: ":") }).dropFirst().drop(while: { $0 == UInt8(ascii: " ") }) {
            guard d >= UInt8(ascii: "0"), d <= UInt8(ascii: "9") else { break }
            v = v * 10 + Int(d - UInt8(ascii: "0"))
        }
        return v
    }
}
