// SPDX-License-Identifier: LGPL-2.1-or-later
import CNftables
import Glibc
import NetpermCore
import NetpermIO
import NetpermProtocol

/// What went wrong talking to nftables.
public enum NftError: Error, CustomStringConvertible, Sendable {
    /// libnftables could not be loaded (not installed): dlopen's message.
    case noLibrary(String)
    /// libnftables could not make a context (out of memory, no netlink socket).
    case noContext
    /// nft refused the script, or the kernel refused the transaction: nft's own messages (they name the line).
    case rejected(String)

    public var description: String {
        switch self {
        case let .noLibrary(message): return "cannot load libnftables: \(message)"
        case .noContext: return "libnftables could not create a context"
        case let .rejected(message): return message
        }
    }
}

/// libnftables' entry points, looked up once when enforcement first needs them: a daemon in Mode=off never maps
/// the library (nor libnftnl, libmnl, libxtables, libjansson and libgmp, which it pulls in).
private struct Library {
    let new: np_nft_ctx_new_fn
    let free: np_nft_ctx_free_fn
    let bufferOutput: np_nft_ctx_buffer_fn
    let bufferError: np_nft_ctx_buffer_fn
    let outputBuffer: np_nft_ctx_get_buffer_fn
    let errorBuffer: np_nft_ctx_get_buffer_fn
    let run: np_nft_run_cmd_from_buffer_fn
    let setDryRun: np_nft_ctx_set_dry_run_fn

    /// The event loop's thread is the only caller.
    nonisolated(unsafe) static var loaded: Library?

    static func load() throws(NftError) -> Library {
        if let loaded { return loaded }
        guard let h = dlopen("libnftables.so.1", RTLD_NOW | RTLD_LOCAL) else {
            throw .noLibrary(dlerror().map { String(cString: $0) } ?? "dlopen failed")
        }
        func sym<T>(_ name: String, _: T.Type) throws(NftError) -> T {
            guard let p = dlsym(h, name) else { throw .noLibrary("no symbol \(name)") }
            return unsafeBitCast(p, to: T.self)
        }
        let lib = Library(new: try sym("nft_ctx_new", np_nft_ctx_new_fn.self),
                          free: try sym("nft_ctx_free", np_nft_ctx_free_fn.self),
                          bufferOutput: try sym("nft_ctx_buffer_output", np_nft_ctx_buffer_fn.self),
                          bufferError: try sym("nft_ctx_buffer_error", np_nft_ctx_buffer_fn.self),
                          outputBuffer: try sym("nft_ctx_get_output_buffer", np_nft_ctx_get_buffer_fn.self),
                          errorBuffer: try sym("nft_ctx_get_error_buffer", np_nft_ctx_get_buffer_fn.self),
                          run: try sym("nft_run_cmd_from_buffer", np_nft_run_cmd_from_buffer_fn.self),
                          setDryRun: try sym("nft_ctx_set_dry_run", np_nft_ctx_set_dry_run_fn.self))
        loaded = lib
        return lib
    }
}

/// One libnftables context, kept for the daemon's life: what `nft -f` does, without a process. A script given to
/// `run` is one transaction: the kernel applies all of it or none of it, and no packet sees a state in between.
public final class Nftables {
    private let lib: Library
    private let ctx: OpaquePointer

    public init() throws(NftError) {
        let lib = try Library.load()
        self.lib = lib
        // libnftables waits on its netlink socket with select(2): the socket must get a number below 1024.
        guard let ctx = LowDescriptors.whileFree({ lib.new(UInt32(NFT_CTX_DEFAULT)) }) else {
            throw .noContext
        }
        self.ctx = ctx
        // Output and errors into buffers, never to the daemon's stdout and stderr.
        guard lib.bufferOutput(ctx) == 0, lib.bufferError(ctx) == 0 else {
            lib.free(ctx)
            throw .noContext
        }
    }

    // Its socket's number goes back to the reserve as it closes.
    deinit { LowDescriptors.whileFree { [lib, ctx] in lib.free(ctx) } }

    /// Runs an nft script (as `nft -f`) and returns what it printed (a `list` command's text).
    @discardableResult
    public func run(_ script: String) throws(NftError) -> String {
        // It may open its socket again (after an error): below 1024, as at the start.
        let r = LowDescriptors.whileFree { lib.run(ctx, script) }
        let output = lib.outputBuffer(ctx).map { String(cString: $0) } ?? ""
        let errors = lib.errorBuffer(ctx).map { String(cString: $0) } ?? ""
        guard r == 0 else {
            let message = errors.split(separator: "\n").prefix(6).joined(separator: " / ")
            throw .rejected(message.isEmpty ? "nft failed (\(r))" : message)
        }
        return output
    }

    /// Frees what the context cached of the ruleset (for 10,000 apps about 40 MB), keeping the context and its
    /// socket: libnftables drops its cache after a dry run, and a dry run of nothing sends nothing. Freeing the
    /// context instead would close its socket, and after a commit that removed anything the kernel makes that close
    /// wait for an RCU grace period (4-40 ms here) holding the ruleset's commit lock.
    public func dropCache() {
        lib.setDryRun(ctx, true)
        _ = LowDescriptors.whileFree { lib.run(ctx, "") }
        lib.setDryRun(ctx, false)
    }
}
