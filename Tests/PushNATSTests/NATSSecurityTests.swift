import Foundation
import PushEventLoop
import PushNATS
import PushTestSupport
import Testing

/// NATSSecurity on the connection itself: TLS with a client certificate and a user, the
/// start-up probe's verdicts, and URLs redacted wherever they are shown.
@Suite("NATS connections with TLS and credentials", .ownThread, .serialized, .enabled(if: NATSServer.testsEnabled))
struct NATSSecurityTests {
    /// A CA, a server certificate for 127.0.0.1 and a client certificate, removed at deinit.
    final class Certificates {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("securepush-nats-cert-\(UUID().uuidString)").path
        let authority: TestCertificateAuthority
        let server: (certificate: String, key: String)
        let client: (certificate: String, key: String)

        init() throws {
            authority = try TestCertificateAuthority(name: "nats", in: directory)
            server = try authority.issue("server", subjectAltNames: "IP:127.0.0.1")
            client = try authority.issue("client")
        }

        deinit { try? FileManager.default.removeItem(atPath: directory) }

        func serverSecurity(_ authentication: NATSServerSecurity.Authentication) -> NATSServerSecurity {
            NATSServerSecurity(tls: .init(certificateFile: server.certificate, keyFile: server.key, clientCAFile: authority.certificateFile),
                               authentication: authentication)
        }

        func clientSecurity(_ credentials: NATSSecurity.Credentials) -> NATSSecurity {
            NATSSecurity(tls: .init(caFile: authority.certificateFile, certificateFile: client.certificate, keyFile: client.key),
                         credentials: credentials)
        }
    }

    @Test("over TLS with a client certificate and a user: a message goes round through the server")
    func roundTrip() async throws {
        let certificates = try Certificates()
        let serverSecurity = certificates.serverSecurity(.user("u", password: "p"))
        let server = try await onOwnThread { try NATSServer(security: serverSecurity) }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        // Two connections: a connection does not get its own messages (no echo).
        let security = certificates.clientSecurity(.user("u", password: "p"))
        let subscriber = try NATSConnection(loop: loop, servers: [server.url], name: "tls-sub", security: security)
        let publisher = try NATSConnection(loop: loop, servers: [server.url], name: "tls-pub", security: security)
        #expect(loop.run(until: { subscriber.isConnected && publisher.isConnected }, timeoutSeconds: 10), "\(server.log)")
        var received: [UInt8]?
        try subscriber.subscribe("secure.echo") { received = $0.data }
        try settle(loop, subscriber)
        try publisher.publish("secure.echo", [1, 2, 3])
        #expect(loop.run(until: { received != nil }, timeoutSeconds: 5))
        #expect(received == [1, 2, 3])
        subscriber.close()
        publisher.close()
    }

    @Test("the probe: passes when connected or when nothing answers; a wrong password or CA is a refusal with the server's reason")
    func probe() async throws {
        let certificates = try Certificates()
        let serverSecurity = certificates.serverSecurity(.user("u", password: "p"))
        let server = try await onOwnThread { try NATSServer(security: serverSecurity) }
        try NATSConnection.probe(servers: [server.url], name: "probe", security: certificates.clientSecurity(.user("u", password: "p")))
        let nobody = try freeLoopbackPort()
        try NATSConnection.probe(servers: ["nats://127.0.0.1:\(nobody)"], name: "probe", security: certificates.clientSecurity(.none))

        do {
            try NATSConnection.probe(servers: [server.url], name: "probe", security: certificates.clientSecurity(.user("u", password: "wrong")))
            Issue.record("a wrong password passed the probe")
        } catch {
            guard case .refused(let named, let reason) = error else { throw error }
            #expect(named == server.url && reason.contains("Authorization Violation"), "\(reason)")
        }
        // The server's own certificate as the CA: it did not sign itself.
        var untrusted = certificates.clientSecurity(.user("u", password: "p"))
        untrusted.tls?.caFile = certificates.server.certificate
        #expect(throws: NATSError.self) { try NATSConnection.probe(servers: [server.url], name: "probe", security: untrusted) }
    }

    @Test("a TLS file that cannot be loaded is named")
    func missingFile() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let security = NATSSecurity(tls: .init(caFile: "/nonexistent/ca.pem"))
        do {
            _ = try NATSConnection(loop: loop, servers: ["nats://127.0.0.1:4222"], name: "t", security: security)
            Issue.record("a missing CA file was accepted")
        } catch {
            guard case .tlsFile(let path, _) = error else { throw error }
            #expect(path == "/nonexistent/ca.pem")
        }
    }

    @Test("URLs are shown without what precedes an @")
    func redaction() {
        #expect(NATSNames.redacted("nats://user:secret@host:4222") == "nats://***@host:4222")
        #expect(NATSNames.redacted("tls://token@host:4222") == "tls://***@host:4222")
        #expect(NATSNames.redacted("nats://host:4222") == "nats://host:4222")
        #expect(NATSNames.redacted(["nats://a:b@h:1", "nats://h:2"]) == "nats://***@h:1,nats://h:2")
        #expect(!NATSError.invalidURL("nats://u:secret@h:x").description.contains("secret"))
    }
}

@Suite("NATSConnection when libnats gives up", .ownThread, .enabled(if: NATSServer.testsEnabled))
struct NATSGiveUpTests {
    @Test("a server that refuses the credentials twice in a row: libnats gives up for good, and the connection closes and keeps its last error")
    func refusedCredentialsGiveUp() async throws {
        let server = try await onOwnThread { try NATSServer(security: NATSServerSecurity(authentication: .token("the-right-token"))) }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        var security = NATSSecurity()
        security.credentials = .token("a-wrong-token")
        let connection: NATSConnection
        do {
            connection = try NATSConnection(loop: loop, servers: [server.url], name: "refused", security: security)
        } catch {
            // Refused inside init: nothing to give up on later.
            #expect("\(error)".contains("Authorization") || "\(error)".contains("authorization"), "\(error)")
            return
        }
        let log = EventLog(connection)
        #expect(loop.run(until: { log.events.contains(.closed) }, timeoutSeconds: 10), "\(log.events)")
        // libnats reports its last error ("no server available" once it has given up).
        #expect(connection.gaveUpReason != nil)
        #expect(!connection.isConnected && !log.events.contains(.connected))
    }
}

@Suite("NATSConnection reopening after libnats gave up", .ownThread, .enabled(if: NATSServer.testsEnabled))
struct NATSReopenTests {
    static func writeConfig(_ path: String, token: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data("authorization { token: \"\(token)\" }\n".utf8),
                                             attributes: [.posixPermissions: 0o600])
        else { throw TimedOut(description: "cannot write \(path)") }
    }

    @Test("refused twice in a row after a restart: .gaveUp with the reason, new connections after a backoff while refused, then .reconnected with the subscriptions made again")
    func reopensWithItsSubscriptions() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("securepush-nats-reopen-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let config = directory + "/auth.conf"
        try Self.writeConfig(config, token: "the-token")
        let server = try await onOwnThread { try NATSServer(security: NATSServerSecurity(authentication: .configFile(config))) }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        var security = NATSSecurity()
        security.credentials = .token("the-token")
        let connection = try NATSConnection(loop: loop, servers: [server.url], name: "reopening", security: security,
                                            reopen: .init(first: .milliseconds(100), longest: .milliseconds(400)))
        let log = EventLog(connection)
        var received: [[UInt8]] = []
        try connection.subscribe("reopen.test") { received.append($0.data) }
        #expect(loop.run(until: { connection.isConnected }))

        try Self.writeConfig(config, token: "another-token")
        server.stop()
        try server.restart()
        #expect(loop.run(until: { log.events.contains(.gaveUp) }, timeoutSeconds: 10), "\(log.events)")
        #expect(connection.isReopening && connection.gaveUpReason != nil && !connection.isConnected)
        // Reopened connections are refused too and give up again, each after a longer wait.
        #expect(loop.run(until: { connection.reopenAttempts >= 2 }, timeoutSeconds: 10), "\(log.events)")
        #expect(!log.events.contains(.closed))

        try Self.writeConfig(config, token: "the-token")
        server.stop()
        try server.restart()
        #expect(loop.run(until: { log.events.last == .reconnected && connection.isConnected }, timeoutSeconds: 10), "\(log.events)")
        #expect(!connection.isReopening && connection.gaveUpReason == nil)
        var senderSecurity = NATSSecurity()
        senderSecurity.credentials = .token("the-token")
        let sender = try NATSConnection(loop: loop, servers: [server.url], name: "sender", security: senderSecurity)
        #expect(loop.run(until: { sender.isConnected }))
        try settle(loop, connection)
        try sender.publish("reopen.test", [7])
        #expect(loop.run(until: { received == [[7]] }), "\(received)")

        connection.close()
        #expect(loop.run(until: { log.events.last == .closed }))
    }
}
