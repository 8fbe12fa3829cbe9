import CLibevent
import Glibc

/// Frees the bufferevent with its socket and SSL.
///
/// Our bufferevents are made without BEV_OPT_CLOSE_ON_FREE, so that one can be freed
/// while its socket and SSL move to another loop (`detach`). Otherwise they must live
/// exactly as long as that option would keep them: libevent may still use the SSL
/// after a callback of ours freed the bufferevent (its write loop goes on while output
/// remains), and it finalizes a bufferevent only once such a callback has unwound
/// (on loop shutdown, `event_base_free` runs pending finalizers). So the finalizer
/// releases them: it frees the input buffer, and a one-byte reference chain added to
/// that buffer here runs its cleanup then.
func freeTLSBufferevent(_ bev: OpaquePointer) {
    let owned = TLSSessionRelease(fd: bufferevent_getfd(bev), ssl: bufferevent_openssl_get_ssl(bev))
    let context = Unmanaged.passRetained(owned).toOpaque()
    if evbuffer_add_reference(bufferevent_get_input(bev), tlsReleaseMarker, 1, tlsReleaseCleanup, context) != 0 {
        // No memory even for that: keep them (a leak) rather than risk a use after free.
        Unmanaged<TLSSessionRelease>.fromOpaque(context).release()
        owned.keep()
    }
    bufferevent_free(bev)
}

/// A TLS connection's socket and SSL, released when libevent finalizes its bufferevent
/// (see `freeTLSBufferevent`).
private final class TLSSessionRelease {
    private var fd: Int32
    private var ssl: OpaquePointer?

    init(fd: Int32, ssl: OpaquePointer?) {
        self.fd = fd
        self.ssl = ssl
    }

    /// Leaves both open for good.
    func keep() {
        fd = -1
        ssl = nil
    }

    deinit {
        if let ssl { SSL_free(ssl) }
        if fd >= 0 { Glibc.close(fd) }
    }
}

/// The byte the release chain points at; never read.
nonisolated(unsafe) private let tlsReleaseMarker = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)

private func tlsReleaseCleanup(_ data: UnsafeRawPointer?, _ length: Int, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<TLSSessionRelease>.fromOpaque(context).release()
}
