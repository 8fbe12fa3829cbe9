import Foundation
import PushEventLoop
import PushWire
import Testing

/// A plain client on a TLS port and a TLS client on a plain port are told so at once, and
/// OpenSSL's failures read as one line.
extension EventLoopSuite {
    private func selfSignedFiles() throws -> (directory: String, certificate: String, key: String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushloop-mismatch-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let certificate = directory + "/cert.pem"
        let key = directory + "/key.pem"
        try SelfSignedCertificate.write(commonName: "localhost", subjectAltNames: ["DNS:localhost", "IP:127.0.0.1"],
                                        certificatePath: certificate, privateKeyPath: key)
        return (directory, certificate, key)
    }

    @Test func aPlainClientOnATLSPortGetsAGoawaySayingSo() throws {
        let files = try selfSignedFiles()
        defer { try? FileManager.default.removeItem(atPath: files.directory) }
        let serverTLS = try TLSContext.server(certificateFile: files.certificate, privateKeyFile: files.key)
        try withEventLoop { loop in
            var serverReasons: [CloseReason] = []
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0, tls: serverTLS) { connection in
                connection.callbacks.close = { _, reason in serverReasons.append(reason) }
            }
            var received: Message?
            var clientClosed = false
            Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                guard case .success(let connection) = result else {
                    Issue.record("connect failed: \(result)")
                    loop.stop()
                    return
                }
                connection.callbacks.frame = { _, header, body in
                    received = try? Message.decode(header: header, body: body)
                }
                connection.callbacks.close = { _, _ in
                    clientClosed = true
                    loop.stop()
                }
                connection.write(Message.hello(Hello(role: .device)).encoded(correlation: 1))
            }
            runLoop(loop, timeout: .seconds(5))
            #expect(clientClosed)
            guard case .goaway(let goaway)? = received else {
                Issue.record("expected a GOAWAY, got \(String(describing: received))")
                return
            }
            #expect(goaway.status == .badRequest)
            #expect(goaway.message?.contains("TLS") == true)
            #expect(serverReasons.count == 1)
            listener.close()
        }
    }

    /// A client that connects and never speaks: the server's GOAWAY can never be written
    /// before a handshake, so the close-after-flush deadline must close it anyway.
    @Test func aSilentClientOnATLSPortIsClosedAtTheFlushDeadline() throws {
        let files = try selfSignedFiles()
        defer { try? FileManager.default.removeItem(atPath: files.directory) }
        let serverTLS = try TLSContext.server(certificateFile: files.certificate, privateKeyFile: files.key)
        try withEventLoop { loop in
            var serverReason: CloseReason?
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0, tls: serverTLS) { connection in
                connection.callbacks.close = { _, reason in
                    serverReason = reason
                    loop.stop()
                }
                connection.write(makeFrame(correlation: 1))
                connection.closeAfterFlush(timeout: .milliseconds(100))
            }
            var client: Connection?
            Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                if case .success(let connection) = result { client = connection }
            }
            runLoop(loop, timeout: .seconds(5))
            #expect(serverReason == .flushTimeout)
            client?.close()
            listener.close()
        }
    }

    @Test func aTLSClientOnAPlainPortIsToldTheServerDoesNotSpeakTLS() throws {
        let files = try selfSignedFiles()
        defer { try? FileManager.default.removeItem(atPath: files.directory) }
        let clientTLS = try TLSContext.client(caFile: files.certificate)
        try withEventLoop { loop in
            // A plain securepush server answers bytes it cannot frame with a GOAWAY.
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in
                connection.callbacks.framingError = { connection, _ in
                    connection.write(Message.goaway(Goaway(status: .malformedFrame, lastCorrelation: 0)).encoded(correlation: 0))
                    connection.closeAfterFlush()
                }
            }
            var outcome: ConnectError?
            Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port, tls: clientTLS, serverName: "localhost") { result in
                if case .failure(let error) = result { outcome = error }
                if case .success(let connection) = result { connection.close() }
                loop.stop()
            }
            runLoop(loop, timeout: .seconds(5))
            guard case .notTLS(let detail)? = outcome else {
                Issue.record("expected notTLS, got \(String(describing: outcome))")
                return
            }
            #expect(!detail.contains("error:"), "no raw OpenSSL error codes: \(detail)")
            #expect(outcome?.description.hasPrefix("the server does not speak TLS") == true)
            listener.close()
        }
    }

    @Test func aFailedVerificationReadsAsOneLine() throws {
        let files = try selfSignedFiles()
        let other = try selfSignedFiles()
        defer {
            try? FileManager.default.removeItem(atPath: files.directory)
            try? FileManager.default.removeItem(atPath: other.directory)
        }
        let serverTLS = try TLSContext.server(certificateFile: files.certificate, privateKeyFile: files.key)
        let clientTLS = try TLSContext.client(caFile: other.certificate)
        try withEventLoop { loop in
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0, tls: serverTLS) { _ in }
            var outcome: ConnectError?
            Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port, tls: clientTLS, serverName: "localhost") { result in
                if case .failure(let error) = result { outcome = error }
                if case .success(let connection) = result { connection.close() }
                loop.stop()
            }
            runLoop(loop, timeout: .seconds(5))
            guard case .tls(let message)? = outcome else {
                Issue.record("expected a TLS failure, got \(String(describing: outcome))")
                return
            }
            #expect(message.hasPrefix("certificate verify failed: "), "\(message)")
            #expect(!message.contains("error:") && !message.contains("\n") && !message.contains("routines"), "\(message)")
            listener.close()
        }
    }

    @Test func aMissingCertificateFileIsNamedInOneLine() {
        do {
            _ = try TLSContext.server(certificateFile: "/nonexistent/cert.pem", privateKeyFile: "/nonexistent/key.pem")
            Issue.record("a missing certificate loaded")
        } catch {
            let text = error.description
            #expect(text.hasPrefix("loading certificate /nonexistent/cert.pem: "), "\(text)")
            #expect(text.contains("No such file or directory"), "\(text)")
            #expect(!text.contains("error:") && !text.contains("\n") && !text.contains("system lib"), "\(text)")
        }
    }
}
