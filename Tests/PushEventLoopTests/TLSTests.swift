import Foundation
import PushEventLoop
import PushProcess
import PushWire
import Testing

/// A temporary directory holding a self-signed certificate for "localhost" / 127.0.0.1.
private struct CertificateFiles {
    let directory: String
    var certificate: String { directory + "/cert.pem" }
    var key: String { directory + "/key.pem" }

    /// With the openssl CLI when it is installed (as the brief asks), else through the
    /// OpenSSL C API.
    static func make(preferCLI: Bool = true) throws -> CertificateFiles {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("pushloop-tls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let files = CertificateFiles(directory: directory)
        if preferCLI, let openssl = findExecutable("openssl") {
            let result = try ChildProcess.run(executable: openssl, arguments: [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", files.key, "-out", files.certificate, "-days", "2", "-subj", "/CN=localhost",
                "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            ], seconds: 30)
            if result.status == 0 { return files }
        }
        try SelfSignedCertificate.write(
            commonName: "localhost", subjectAltNames: ["DNS:localhost", "IP:127.0.0.1"],
            certificatePath: files.certificate, privateKeyPath: files.key)
        return files
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    private static func findExecutable(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}

extension EventLoopSuite {
    private func tlsEcho(files: CertificateFiles, serverName: String, frames: Int, maxBody: Int = 200) throws
        -> (client: PipelinedClient, connectError: ConnectError?, serverReasons: [CloseReason])
    {
        let serverTLS = try TLSContext.server(certificateFile: files.certificate, privateKeyFile: files.key)
        let clientTLS = try TLSContext.client(caFile: files.certificate)
        let client = PipelinedClient(total: frames, window: maxBody > 1000 ? 3 : 16, maxBody: maxBody)
        var connectError: ConnectError?
        let echo = EchoHandler()
        try withEventLoop { loop in
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0, tls: serverTLS) { connection in
                #expect(connection.isTLS)
                connection.handler = echo
            }
            client.done = { loop.stop() }
            Connection.connect(
                loop: loop, host: "127.0.0.1", port: listener.port, tls: clientTLS, serverName: serverName
            ) { result in
                switch result {
                case .success(let connection):
                    #expect(connection.isTLS)
                    connection.handler = client
                    client.start(connection)
                case .failure(let error):
                    connectError = error
                    // Give the server a moment to see the failed handshake too.
                    loop.schedule(after: .milliseconds(50)) { loop.stop() }
                }
            }
            runLoop(loop)
        }
        return (client, connectError, echo.closeReasons)
    }

    @Test func tlsRoundTripWithSelfSignedCertificate() throws {
        let files = try CertificateFiles.make()
        defer { files.remove() }
        let (client, error, _) = try tlsEcho(files: files, serverName: "localhost", frames: 2_000)
        #expect(error == nil)
        #expect(client.failures.isEmpty, "\(client.failures.prefix(3))")
        #expect(client.received == 2_000)
    }

    @Test func tlsCarriesLargeFramesAcrossRecords() throws {
        let files = try CertificateFiles.make()
        defer { files.remove() }
        let (client, error, _) = try tlsEcho(
            files: files, serverName: "localhost", frames: 100, maxBody: FrameLimits.defaultMaxFrame - FrameHeader.size)
        #expect(error == nil)
        #expect(client.failures.isEmpty, "\(client.failures.prefix(3))")
        #expect(client.received == 100)
    }

    @Test func tlsVerifiesIPAddressSANWithCertificateFromCAPI() throws {
        let files = try CertificateFiles.make(preferCLI: false)
        defer { files.remove() }
        let (client, error, _) = try tlsEcho(files: files, serverName: "127.0.0.1", frames: 100)
        #expect(error == nil)
        #expect(client.received == 100)
    }

    @Test func tlsRejectsAServerCertificateForAnotherName() throws {
        let files = try CertificateFiles.make()
        defer { files.remove() }
        let (client, error, serverReasons) = try tlsEcho(files: files, serverName: "push.example.com", frames: 1)
        #expect(client.received == 0)
        guard case .tls(let message)? = error else {
            Issue.record("expected a TLS error, got \(String(describing: error))")
            return
        }
        #expect(message.contains("verif"), "message: \(message)")
        // The server saw the handshake fail and closed its side.
        #expect(serverReasons.count == 1)
    }

    @Test func tlsConnectionsClosedInsideCallbacksLeakNothing() throws {
        let files = try CertificateFiles.make()
        defer { files.remove() }
        let serverTLS = try TLSContext.server(certificateFile: files.certificate, privateKeyFile: files.key)
        let clientTLS = try TLSContext.client(caFile: files.certificate)
        try withEventLoop { loop in
            let echo = EchoHandler()
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0, tls: serverTLS) { $0.handler = echo }
            let total = 200
            var closed = 0
            var failures: [String] = []
            let frame = makeFrame(correlation: 5, body: [9, 9, 9])
            for _ in 0..<total {
                Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port, tls: clientTLS,
                                   serverName: "localhost") { result in
                    guard case .success(let connection) = result else {
                        failures.append("\(result)")
                        closed += 1
                        return
                    }
                    // Close from inside the frame callback, mid-way through the TLS read path.
                    connection.callbacks.frame = { connection, _, _ in connection.close() }
                    connection.callbacks.close = { _, reason in
                        if reason != .local { failures.append("\(reason)") }
                        closed += 1
                    }
                    connection.write(frame)
                }
            }
            let poll = loop.schedule(after: .milliseconds(5), repeating: true) {
                if closed == total, echo.closeReasons.count == total { loop.stop() }
            }
            runLoop(loop)
            poll.cancel()
            #expect(failures.isEmpty, "\(failures.prefix(3))")
            #expect(echo.framesEchoed == total)
            #expect(echo.closeReasons.allSatisfy { $0 == .peerClosed })
        }
    }

    /// Frames the bufferevent has already decrypted stay there (or in the decoder) while
    /// paused, and each resume delivers the next one with nothing new arriving.
    @Test func tlsPauseHoldsDecryptedFramesUntilResumed() throws {
        let files = try CertificateFiles.make()
        defer { files.remove() }
        let serverTLS = try TLSContext.server(certificateFile: files.certificate, privateKeyFile: files.key)
        let clientTLS = try TLSContext.client(caFile: files.certificate)
        try withEventLoop { loop in
            var burst: [UInt8] = []
            for correlation in UInt32(0)..<10 { burst += makeFrame(correlation: correlation, body: patternBody(correlation)) }
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0, tls: serverTLS) { $0.write(burst) }
            var seen: [UInt32] = []
            var deliveredWhilePaused = 0
            var paused = false
            Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port, tls: clientTLS,
                               serverName: "localhost") { result in
                guard case .success(let connection) = result else {
                    Issue.record("connect failed: \(result)")
                    loop.stop()
                    return
                }
                connection.callbacks.frame = { connection, header, body in
                    if paused { deliveredWhilePaused += 1 }
                    #expect(matchesPattern(body, header.correlation))
                    seen.append(header.correlation)
                    if seen.count == 10 {
                        loop.stop()
                        return
                    }
                    connection.pauseReading()
                    paused = true
                    loop.schedule(after: .milliseconds(1)) {
                        paused = false
                        connection.resumeReading()
                    }
                }
            }
            runLoop(loop, timeout: .seconds(5))
            #expect(seen == Array(0..<10))
            #expect(deliveredWhilePaused == 0)
        }
    }

    @Test func tlsContextErrorsCarryOpenSSLText() throws {
        #expect(throws: TLSError.self) {
            _ = try TLSContext.server(certificateFile: "/nonexistent/cert.pem", privateKeyFile: "/nonexistent/key.pem")
        }
        do {
            _ = try TLSContext.client(caFile: "/nonexistent/ca.pem")
            Issue.record("loading a missing CA file succeeded")
        } catch {
            guard case .openSSL(let operation, let message) = error else { return }
            #expect(operation.contains("/nonexistent/ca.pem"))
            #expect(!message.isEmpty)
        }
    }
}
