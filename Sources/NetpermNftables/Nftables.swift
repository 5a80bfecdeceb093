import CNftables

/// What went wrong talking to nftables.
public enum NftError: Error, CustomStringConvertible, Sendable {
    /// libnftables could not make a context (out of memory, no netlink socket).
    case noContext
    /// nft refused the script, or the kernel refused the transaction: nft's own messages (they name the line).
    case rejected(String)

    public var description: String {
        switch self {
        case .noContext: return "libnftables could not create a context"
        case let .rejected(message): return message
        }
    }
}

/// One libnftables context, kept for the daemon's life: what `nft -f` does, without a process. A script given to
/// `run` is one transaction: the kernel applies all of it or none of it, and no packet sees a state in between.
public final class Nftables {
    private let ctx: OpaquePointer

    public init() throws(NftError) {
        guard let ctx = nft_ctx_new(UInt32(NFT_CTX_DEFAULT)) else { throw .noContext }
        self.ctx = ctx
        // Output and errors into buffers, never to the daemon's stdout and stderr.
        guard nft_ctx_buffer_output(ctx) == 0, nft_ctx_buffer_error(ctx) == 0 else {
            nft_ctx_free(ctx)
            throw .noContext
        }
    }

    deinit { nft_ctx_free(ctx) }

    /// Runs an nft script (as `nft -f`) and returns what it printed (a `list` command's text).
    @discardableResult
    public func run(_ script: String) throws(NftError) -> String {
        let r = nft_run_cmd_from_buffer(ctx, script)
        let output = nft_ctx_get_output_buffer(ctx).map { String(cString: $0) } ?? ""
        let errors = nft_ctx_get_error_buffer(ctx).map { String(cString: $0) } ?? ""
        guard r == 0 else {
            let message = errors.split(separator: "\n").prefix(6).joined(separator: " / ")
            throw .rejected(message.isEmpty ? "nft failed (\(r))" : message)
        }
        return output
    }
}
