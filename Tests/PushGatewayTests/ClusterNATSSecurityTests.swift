import Foundation
import Testing
import PushClient
import PushTestSupport
import PushWire

/// Cluster nodes on secured links to NATS (issue 28, item 2): TLS with a CA and a client
/// certificate, a user with a password file or a token file; a refused node fails at
/// start with the reason, and no secret reaches a log or an error.
@Suite("A gateway cluster over NATS with TLS and credentials", .ownThread, .serialized, .enabled(if: NATSServer.testsEnabled))
struct ClusterNATSSecurityTests {
    static let password = "pw-5f2c9e-never-logged"
    static let token = "tok-81d0aa-never-logged"

    /// A CA, the server's certificate for 127.0.0.1 and a client certificate, with files
    /// holding the password and the token (owner-only), in a directory removed at deinit.
    final class Material {
        let directory: String
        let authority: TestCertificateAuthority
        let server: (certificate: String, key: String)
        let client: (certificate: String, key: String)
        let passwordFile: String
        let tokenFile: String

        init() throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("securepush-nats-tls-\(UUID().uuidString)").path
            authority = try TestCertificateAuthority(name: "cluster", in: directory)
            server = try authority.issue("nats-server", subjectAltNames: "IP:127.0.0.1,DNS:localhost")
            client = try authority.issue("gateway")
            passwordFile = directory + "/nats.password"
            tokenFile = directory + "/nats.token"
            try Self.writeOwnerOnly(passwordFile, ClusterNATSSecurityTests.password + "\n")
            try Self.writeOwnerOnly(tokenFile, ClusterNATSSecurityTests.token + "\n")
        }

        deinit { try? FileManager.default.removeItem(atPath: directory) }

        static func writeOwnerOnly(_ path: String, _ text: String) throws {
            guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
                throw ServiceError.failed("cannot write \(path)")
            }
        }

        /// nats-server with TLS, verifying client certificates, and a user `gateway`.
        var serverSecurity: NATSServerSecurity {
            NATSServerSecurity(tls: .init(certificateFile: server.certificate, keyFile: server.key, clientCAFile: authority.certificateFile),
                               authentication: .user("gateway", password: ClusterNATSSecurityTests.password))
        }

        /// The node flags that satisfy `serverSecurity`.
        var nodeArguments: [String] {
            ["--nats-ca", authority.certificateFile, "--nats-cert", client.certificate, "--nats-key", client.key,
             "--nats-user", "gateway", "--nats-password-file", passwordFile]
        }
    }

    @Test("two nodes over TLS with client certificates and a password file: a push via node 1 reaches a device on node 2; no secret logged")
    func pushOverTLS() throws {
        let material = try Material()
        let cluster = try GatewayClusterHarness(nodes: 2, devices: [ClusterDevice("phone")], gatewayArguments: material.nodeArguments,
                                                natsSecurity: material.serverSecurity)
        try cluster.waitUntilFormed()
        let device = try cluster.connectDevice("phone", to: 1)
        try cluster.waitUntilEveryNodeRoutes(to: "phone")
        let ack = try cluster.provider(via: 0).push(.device("phone"), id: "over-tls")
        #expect(ack == PushAck(written: 1, queued: 0), "\(cluster.diagnostics())")
        #expect(try device.nextFrame() == .push("over-tls"))

        // The server saw TLS connections of the user, one per node.
        let connections = try HTTPGet.fetch(port: cluster.nats.monitorPort, path: "/connz?auth=1").body
        #expect(connections.components(separatedBy: "\"authorized_user\": \"gateway\"").count - 1 >= 2, "\(connections)")
        #expect(connections.contains("\"tls_version\""), "\(connections)")
        for index in 0..<2 {
            let log = try cluster.node(index).standardErrorText()
            #expect(log.contains("nats_tls=true") || log.contains("\"nats_tls\":\"true\""), "\(log)")
            #expect(!log.contains(Self.password), "node \(index) logged the password")
        }
    }

    @Test("a token file, from the config file's gateway.nats_* keys: the node joins and never logs the token")
    func tokenFromConfig() throws {
        let material = try Material()
        let security = NATSServerSecurity(tls: .init(certificateFile: material.server.certificate, keyFile: material.server.key),
                                          authentication: .token(Self.token))
        let nats = try NATSServer(security: security)
        let deployment = try TemporaryDeployment(settings: [
            ("gateway.nats_ca", material.authority.certificateFile), ("gateway.nats_token_file", material.tokenFile),
        ])
        let node = try ServiceProcess(["gateway", "--data-dir", deployment.directory, "--cluster", nats.url, "--node", "solo",
                                       "--metrics", "127.0.0.1:0"])
        defer { _ = node.terminate() }
        let port = try #require(node.announcedMetricsPort)
        #expect(waitUntil(timeoutSeconds: 20, pollMilliseconds: 50) { (try? HTTPGet.fetch(port: port, path: "/readyz").status) == 200 },
                "\(node.standardErrorText())\n\(nats.log)")
        #expect(!node.standardErrorText().contains(Self.token))
    }

    @Test("an NATS credentials file (user JWT and nkey seed; operator and accounts made here, no nsc): the node joins; a user of an unknown account is refused")
    func credentialsFile() throws {
        let material = try Material()
        let auth = try NATSDecentralizedAuth()
        let serverConfig = material.directory + "/nats-server.conf"
        try Material.writeOwnerOnly(serverConfig, auth.serverConfig)
        let nats = try NATSServer(security: NATSServerSecurity(authentication: .configFile(serverConfig)))
        let credentials = material.directory + "/gateway.creds"
        try Material.writeOwnerOnly(credentials, auth.credentials)

        let deployment = try TemporaryDeployment(commandLine: true)
        let node = try ServiceProcess(["gateway", "--data-dir", deployment.directory, "--cluster", nats.url, "--node", "creds",
                                       "--metrics", "127.0.0.1:0", "--nats-credentials", credentials])
        defer { _ = node.terminate() }
        let port = try #require(node.announcedMetricsPort)
        #expect(waitUntil(timeoutSeconds: 20, pollMilliseconds: 50) { (try? HTTPGet.fetch(port: port, path: "/readyz").status) == 200 },
                "\(node.standardErrorText())\n\(nats.log)")
        let seed = try #require(auth.credentials.split(separator: "\n").first { $0.hasPrefix("SU") })
        #expect(!node.standardErrorText().contains(seed))

        let strangers = material.directory + "/stranger.creds"
        try Material.writeOwnerOnly(strangers, try NATSDecentralizedAuth(userIssuedByStranger: true).credentials)
        let refused = try refusedStart(nats, ["--nats-credentials", strangers])
        #expect(refused.status != 0 && refused.stderr.contains("Authorization Violation"), "\(refused)")
    }

    /// Runs a node that must not start: its exit status and stderr.
    private func refusedStart(_ nats: NATSServer, _ arguments: [String], cluster: String? = nil) throws -> (status: Int32, stderr: String) {
        let deployment = try TemporaryDeployment(commandLine: true)
        let result = try SecurePushBinary.run(["gateway", "--data-dir", deployment.directory, "--listen", "127.0.0.1:0",
                                               "--cluster", cluster ?? nats.url, "--node", "refused"] + arguments, timeoutSeconds: 30)
        return (result.status, result.stderr + result.stdout)
    }

    @Test("a refused node exits at start with the reason: a CA that did not sign the server's certificate, no client certificate, a wrong password")
    func refusals() throws {
        let material = try Material()
        let nats = try NATSServer(security: material.serverSecurity)
        let otherAuthority = try TestCertificateAuthority(name: "other", in: material.directory + "/other")

        var arguments = material.nodeArguments
        arguments[1] = otherAuthority.certificateFile
        let wrongCA = try refusedStart(nats, arguments)
        #expect(wrongCA.status != 0 && wrongCA.stderr.contains("refused the connection") && wrongCA.stderr.contains("certificate"),
                "\(wrongCA)")

        let withoutClientCertificate = try refusedStart(nats, ["--nats-ca", material.authority.certificateFile,
                                                               "--nats-user", "gateway", "--nats-password-file", material.passwordFile])
        // Issue 42, item 5: what happened and its likely cause, not libnats' "Expected 'PONG', got ''".
        #expect(withoutClientCertificate.status != 0 && withoutClientCertificate.stderr.contains("refused the connection")
                    && withoutClientCertificate.stderr.contains("closed the connection at the end of the TLS handshake")
                    && withoutClientCertificate.stderr.contains("requires a client certificate, and none was given")
                    && !withoutClientCertificate.stderr.contains("PONG"), "\(withoutClientCertificate)")

        let wrongPasswordFile = material.directory + "/wrong.password"
        try Material.writeOwnerOnly(wrongPasswordFile, "not-the-password\n")
        arguments = material.nodeArguments
        arguments[arguments.count - 1] = wrongPasswordFile
        let wrongPassword = try refusedStart(nats, arguments)
        #expect(wrongPassword.status != 0 && wrongPassword.stderr.lowercased().contains("authoriz"), "\(wrongPassword)")
        #expect(!wrongPassword.stderr.contains("not-the-password"))

        // The same node with the right files starts: the refusals were about them.
        let deployment = try TemporaryDeployment(commandLine: true)
        let node = try ServiceProcess(["gateway", "--data-dir", deployment.directory,
                                       "--cluster", nats.url, "--node", "accepted"] + material.nodeArguments)
        #expect(node.terminate() == 0, "\(node.standardErrorText())")
    }

    @Test("the server's certificate must carry the URL's host, or the name --nats-server-name gives")
    func serverName() throws {
        let material = try Material()
        let elsewhere = try material.authority.issue("elsewhere", subjectAltNames: "DNS:nats.example")
        let nats = try NATSServer(security: NATSServerSecurity(tls: .init(certificateFile: elsewhere.certificate, keyFile: elsewhere.key)))
        let mismatch = try refusedStart(nats, ["--nats-ca", material.authority.certificateFile])
        #expect(mismatch.status != 0 && mismatch.stderr.contains("mismatch"), "\(mismatch)")

        let deployment = try TemporaryDeployment(commandLine: true)
        let node = try ServiceProcess(["gateway", "--data-dir", deployment.directory, "--cluster", nats.url, "--node", "named",
                                       "--nats-ca", material.authority.certificateFile, "--nats-server-name", "nats.example"])
        #expect(node.terminate() == 0, "\(node.standardErrorText())")
    }

    @Test("files and combinations refused before any connection, each by name; credentials in a URL are refused unrepeated")
    func badSettings() throws {
        let material = try Material()
        let nats = try NATSServer()
        let ca = material.authority.certificateFile

        let open = material.directory + "/open.password"
        try Material.writeOwnerOnly(open, "secret-in-open-file\n")
        chmod(open, 0o644)
        let tooOpen = try refusedStart(nats, ["--nats-user", "gateway", "--nats-password-file", open])
        #expect(tooOpen.status != 0 && tooOpen.stderr.contains(open) && tooOpen.stderr.contains("chmod 600"), "\(tooOpen)")

        let missing = material.directory + "/missing.creds"
        let noCredentials = try refusedStart(nats, ["--nats-credentials", missing])
        #expect(noCredentials.status != 0 && noCredentials.stderr.contains(missing) && noCredentials.stderr.contains("does not exist"),
                "\(noCredentials)")

        let missingCA = try refusedStart(nats, ["--nats-ca", material.directory + "/nope.pem"])
        #expect(missingCA.status != 0 && missingCA.stderr.contains("nope.pem"), "\(missingCA)")

        let twoKinds = try refusedStart(nats, ["--nats-user", "gateway", "--nats-password-file", material.passwordFile,
                                               "--nats-token-file", material.tokenFile])
        #expect(twoKinds.status != 0 && twoKinds.stderr.contains("one kind only"), "\(twoKinds)")

        let certWithoutKey = try refusedStart(nats, ["--nats-ca", ca, "--nats-cert", material.client.certificate])
        #expect(certWithoutKey.status != 0 && certWithoutKey.stderr.contains("go together"), "\(certWithoutKey)")

        let userWithoutFile = try refusedStart(nats, ["--nats-user", "gateway"])
        #expect(userWithoutFile.status != 0 && userWithoutFile.stderr.contains("--nats-password-file"), "\(userWithoutFile)")

        // Issue 42, item 5: one line and exit 1 from the flag, as from the config file.
        let inURL = try refusedStart(nats, [], cluster: "nats://gateway:hunter2-in-url@127.0.0.1:\(nats.port)")
        #expect(inURL.status == 1 && inURL.stderr.contains("--cluster: credentials do not go in the URL"), "\(inURL)")
        #expect(inURL.stderr.split(separator: "\n").count == 1 && !inURL.stderr.contains("USAGE"), "\(inURL)")
        #expect(!inURL.stderr.contains("hunter2-in-url"))
        let inConfig = try TemporaryDeployment()
        let configFile = inConfig.directory + "/securepush.conf"
        try (try String(contentsOfFile: configFile, encoding: .utf8) + "gateway.cluster = nats://gateway:hunter2-in-url@127.0.0.1:\(nats.port)\n")
            .write(toFile: configFile, atomically: true, encoding: .utf8)
        let inConfigURL = try SecurePushBinary.run(["gateway", "--data-dir", inConfig.directory, "--listen", "127.0.0.1:0"])
        #expect(inConfigURL.status == 1 && inConfigURL.stderr.contains("credentials do not go in the URL")
                    && inConfigURL.stderr.split(separator: "\n").count == 1 && !inConfigURL.stderr.contains("hunter2-in-url"), "\(inConfigURL)")

        let deployment = try TemporaryDeployment()
        let config = deployment.directory + "/securepush.conf"
        try (try String(contentsOfFile: config, encoding: .utf8) + "gateway.nats_ca = relative/ca.pem\n")
            .write(toFile: config, atomically: true, encoding: .utf8)
        let relative = try SecurePushBinary.run(["gateway", "--data-dir", deployment.directory, "--listen", "127.0.0.1:0"])
        #expect(relative.status != 0 && relative.stderr.contains("an absolute path"), "\(relative)")
    }
}
