import CLibevent
import Glibc

/// An OpenSSL `SSL_CTX`: certificates, trust, protocol floor (TLS 1.2).
///
/// `@unchecked Sendable` because an `SSL_CTX` that is no longer being configured may be
/// shared by any number of threads creating `SSL` objects from it (OpenSSL locks its
/// internals), and this class exposes no way to configure it after init. One context
/// can therefore serve listeners on several loop threads.
public final class TLSContext: @unchecked Sendable {
    let context: OpaquePointer
    public let isServer: Bool

    private init(context: OpaquePointer, isServer: Bool) {
        self.context = context
        self.isServer = isServer
    }

    deinit { SSL_CTX_free(context) }

    /// A server context from PEM files (the certificate file may hold the whole chain).
    public static func server(certificateFile: String, privateKeyFile: String) throws(TLSError) -> TLSContext {
        let context = try makeContext(method: TLS_server_method(), isServer: true)
        guard SSL_CTX_use_certificate_chain_file(context.context, certificateFile) == 1 else {
            throw failure("loading certificate \(certificateFile)")
        }
        guard SSL_CTX_use_PrivateKey_file(context.context, privateKeyFile, SSL_FILETYPE_PEM) == 1 else {
            throw failure("loading private key \(privateKeyFile)")
        }
        guard SSL_CTX_check_private_key(context.context) == 1 else {
            throw failure("private key does not match the certificate")
        }
        return context
    }

    /// A client context that verifies the server against `caFile` (PEM), or against
    /// the system trust store when `caFile` is nil.
    public static func client(caFile: String?) throws(TLSError) -> TLSContext {
        let context = try makeContext(method: TLS_client_method(), isServer: false)
        if let caFile {
            guard SSL_CTX_load_verify_locations(context.context, caFile, nil) == 1 else {
                throw failure("loading CA file \(caFile)")
            }
        } else if SSL_CTX_set_default_verify_paths(context.context) != 1 {
            throw failure("loading the system trust store")
        }
        SSL_CTX_set_verify(context.context, SSL_VERIFY_PEER, nil)
        return context
    }

    private static func makeContext(method: OpaquePointer?, isServer: Bool) throws(TLSError) -> TLSContext {
        guard let method, let raw = SSL_CTX_new(method) else { throw failure("SSL_CTX_new") }
        let context = TLSContext(context: raw, isServer: isServer)
        guard sp_SSL_CTX_set_min_tls12(raw) == 1 else { throw failure("setting TLS 1.2 as the minimum") }
        // Idle connections hand their 16 KiB record buffers back: most of our
        // connections are idle most of the time.
        _ = sp_SSL_CTX_set_mode(raw, Int(SSL_MODE_RELEASE_BUFFERS))
        return context
    }

    private static func failure(_ operation: String) -> TLSError {
        .openSSL(operation: operation, message: drainErrorQueue() ?? "unknown OpenSSL error")
    }

    // MARK: - Per-connection helpers

    /// A server-side SSL object for an accepted socket.
    func makeServerSSL() -> OpaquePointer? { SSL_new(context) }

    /// A client-side SSL object that sends SNI for host names and checks the
    /// certificate against `serverName` (a DNS name or an IP literal).
    func makeClientSSL(serverName: String?) -> Result<OpaquePointer, ConnectError> {
        guard let ssl = SSL_new(context) else {
            return .failure(.tls(TLSContext.drainErrorQueue() ?? "SSL_new failed"))
        }
        guard let serverName, !serverName.isEmpty else { return .success(ssl) }
        let isIPLiteral = (try? SocketAddress(host: serverName, port: 0)) != nil
        let ok: Bool
        if isIPLiteral {
            // SNI must not carry an IP address (RFC 6066); verify against IP SANs instead.
            let bare = serverName.hasPrefix("[") ? String(serverName.dropFirst().dropLast()) : serverName
            ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), bare) == 1
        } else {
            ok = sp_SSL_set_tlsext_host_name(ssl, serverName) == 1 && SSL_set1_host(ssl, serverName) == 1
        }
        guard ok else {
            SSL_free(ssl)
            return .failure(.tls(TLSContext.drainErrorQueue() ?? "cannot set the expected server name"))
        }
        return .success(ssl)
    }

    /// OpenSSL's reasons for a failed bufferevent, verification result first.
    static func errorMessage(for bev: OpaquePointer) -> String? {
        var parts: [String] = []
        if let ssl = bufferevent_openssl_get_ssl(bev) {
            let verify = SSL_get_verify_result(ssl)
            if verify != X509_V_OK, let text = X509_verify_cert_error_string(verify) {
                parts.append("certificate verification failed: \(String(cString: text))")
            }
        }
        var code = bufferevent_get_openssl_error(bev)
        while code != 0 {
            // libevent queues SSL_get_error() results (SSL_ERROR_SSL, SSL_ERROR_SYSCALL, ...)
            // next to real packed error codes; those carry no library (bits 23+ zero) and
            // say nothing the packed codes or errno do not.
            if code >> 23 != 0 { parts.append(errorString(code)) }
            code = bufferevent_get_openssl_error(bev)
        }
        if let queued = drainErrorQueue() { parts.append(queued) }
        return parts.isEmpty ? nil : parts.joined(separator: "; ")
    }

    /// Best effort: one non-blocking close_notify so the peer sees a clean TLS close.
    static func sendCloseNotify(_ bev: OpaquePointer) {
        guard let ssl = bufferevent_openssl_get_ssl(bev) else { return }
        if SSL_is_init_finished(ssl) == 1 { _ = SSL_shutdown(ssl) }
        ERR_clear_error()
    }

    static func drainErrorQueue() -> String? {
        var parts: [String] = []
        var code = ERR_get_error()
        while code != 0 {
            parts.append(errorString(code))
            code = ERR_get_error()
        }
        return parts.isEmpty ? nil : parts.joined(separator: "; ")
    }

    private static func errorString(_ code: UInt) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
