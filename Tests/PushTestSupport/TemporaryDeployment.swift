import Foundation
import PushClient
import PushSecurity
import PushStoreLogic
import PushWire
import PushStore

/// A temporary deployment directory (keys, config, user database), removed on deinit.
/// Made by the library unless the test is about the command line.
public final class TemporaryDeployment {
    public let directory: String
    public let deployment: Deployment
    private let madeByCommandLine: Bool

    /// Fast hashes keep the tests quick; production keeps the default.
    public static let passwordIterations = 1000

    /// - Parameters:
    ///   - commandLine: made by `securepush init`, users added by `securepush user add`.
    ///   - database: the store keeps its data in this PostgreSQL database (`store.database`).
    ///   - settings: more config keys (not with `commandLine`).
    public init(commandLine: Bool = false, database: String? = nil, settings: [(String, String)] = []) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("securepush-test-\(UUID().uuidString)").path
        madeByCommandLine = commandLine
        if commandLine {
            let result = try SecurePushBinary.run(["init", directory] + (database.map { ["--database", $0] } ?? []))
            guard result.status == 0 else { throw ServiceError.failed("init: \(result.stderr)") }
        } else {
            _ = try Deployment.create(at: directory, settings: (database.map { [("store.database", $0)] } ?? []) + settings)
        }
        let config = directory + "/" + Deployment.configFile
        let text = try String(contentsOfFile: config, encoding: .utf8)
            .replacingOccurrences(of: "password.iterations = \(PasswordHash.defaultIterations)",
                                  with: "password.iterations = \(TemporaryDeployment.passwordIterations)")
        try Deployment.writePrivate(config, text)
        deployment = try Deployment.open(directory)
    }

    /// A copy of `other`'s directory, as another host of the same deployment holds it.
    public init(copying other: TemporaryDeployment) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("securepush-test-\(UUID().uuidString)").path
        madeByCommandLine = other.madeByCommandLine
        try FileManager.default.copyItem(atPath: other.directory, toPath: directory)
        deployment = try Deployment.open(directory)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    public func addUser(_ name: String, password: String) throws {
        if madeByCommandLine {
            let result = try SecurePushBinary.run(["user", "add", name, "--data-dir", directory], stdin: password + "\n")
            guard result.status == 0 else { throw ServiceError.failed("user add: \(result.stderr)") }
            return
        }
        let hash = try PasswordHash.make(password: Array(password.utf8), iterations: TemporaryDeployment.passwordIterations)
        guard try StoreDatabase(deployment).users().add(name, passwordHash: hash.encoded, nowMs: UInt64(Date().timeIntervalSince1970 * 1000)) != nil else {
            throw ServiceError.failed("user \(name) already exists")
        }
    }

    /// A fresh provider credential for the store or the gateway (each accepts it once).
    public func providerCredential(for audience: CredentialAudience) -> [UInt8] {
        HelloCredential.provider(deployment.providerKey).make(for: audience, nowMs: UInt64(Date().timeIntervalSince1970 * 1000))
    }

    /// A fresh gateway credential for the store (each is accepted once): what a gateway
    /// following the registry sends in its HELLO with role 3.
    public func gatewayCredential() -> [UInt8] {
        HelloCredential.gateway(deployment.serverKey).make(for: .store, nowMs: UInt64(Date().timeIntervalSince1970 * 1000))
    }

    /// A device registration signed with this deployment's server key, enrolled in the
    /// deployment's registry as `securepush device enroll` does (revoking the device id's
    /// previous registration) when the store knows `user`. For a user it does not know the
    /// registration is only signed: what a gateway that follows no registry accepts.
    public func registration(_ device: String, user: String = "alice", tags: [String] = [], lifetimeMs: UInt64 = 86_400_000) -> [UInt8] {
        (try? enroll(device, user: user, tags: tags, lifetimeMs: lifetimeMs)) ?? unenrolledRegistration(device, user: user, tags: tags,
                                                                                                      lifetimeMs: lifetimeMs)
    }

    /// Enrolls `device` for the existing user `user` in the deployment's registry (so it may
    /// LOGIN and, through a gateway that follows the registry, connect); its registration.
    @discardableResult
    public func enroll(_ device: String, user: String = "alice", tags: [String] = [], lifetimeMs: UInt64 = 86_400_000) throws -> [UInt8] {
        let signer = CredentialSigner(serverKey: deployment.serverKey, purpose: CredentialSigner.registrationPurpose)
        let enrolment = try registry().enroll(user: user, deviceID: device, tags: tags, lifetimeMs: lifetimeMs,
                                              nowMs: UInt64(Date().timeIntervalSince1970 * 1000), signer: signer)
        return enrolment.registration.credential
    }

    /// The registration the registry holds as enrolled for `device` of `user`, enrolling
    /// it first unless it already does: for a device about to LOGIN, without revoking the
    /// tokens an earlier LOGIN of it got.
    @discardableResult
    public func enrolledRegistration(_ device: String, user: String = "alice") throws -> [UInt8] {
        if let current = try registry().enrolled(deviceID: device), current.user == user,
           current.expiresAt > UInt64(Date().timeIntervalSince1970 * 1000) {
            return current.credential
        }
        return try enroll(device, user: user)
    }

    /// Revokes the enrolled registration of `device`, as `securepush device revoke` does.
    public func revoke(_ device: String) throws {
        guard try registry().revoke(deviceID: device, nowMs: UInt64(Date().timeIntervalSince1970 * 1000)) != nil else {
            throw ServiceError.failed("no enrolled device \(device)")
        }
    }

    /// A registration signed with the deployment's server key that the registry does not
    /// hold: valid by its MAC and expiry alone.
    public func unenrolledRegistration(_ device: String, user: String = "alice", tags: [String] = [], lifetimeMs: UInt64 = 86_400_000,
                                       issuedAtMs: UInt64? = nil) -> [UInt8] {
        let signer = CredentialSigner(serverKey: deployment.serverKey, purpose: CredentialSigner.registrationPurpose)
        let issued = issuedAtMs ?? UInt64(Date().timeIntervalSince1970 * 1000)
        return Registration(deviceID: device, user: user, tags: tags, issuedAt: issued, expiresAt: issued + lifetimeMs).signed(by: signer)
    }

    /// The registry in the deployment's store database, as the device commands open it.
    public func registry() throws -> RegistryAdministering {
        try StoreDatabase(deployment).registry()
    }
}

extension TemporaryDeployment {
    /// A provider connection to the store at `port` on 127.0.0.1, past HELLO_OK.
    public func provider(store port: Int) throws -> BlockingWireClient {
        let client = try BlockingWireClient(host: "127.0.0.1", port: port, timeoutMs: 10_000)
        guard case .helloOK = try client.hello(Hello(role: .provider, credential: providerCredential(for: .store))) else {
            throw ServiceError.failed("the store refused the provider")
        }
        return client
    }
}
