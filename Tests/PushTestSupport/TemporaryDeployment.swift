import Foundation
import PushSecurity
import PushStore

/// A temporary deployment directory (keys, config, user database), removed on deinit.
/// Made by the library unless the test is about the command line.
public final class TemporaryDeployment {
    public let directory: String
    public let deployment: Deployment
    private let madeByCommandLine: Bool

    /// Fast hashes keep the tests quick; production keeps the default.
    static let passwordIterations = 1000

    /// - Parameter commandLine: made by `securepush init`, users added by `securepush user add`.
    public init(commandLine: Bool = false) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("securepush-test-\(UUID().uuidString)").path
        madeByCommandLine = commandLine
        if commandLine {
            let result = try SecurePushBinary.run(["init", directory])
            guard result.status == 0 else { throw ServiceError.failed("init: \(result.stderr)") }
        } else {
            _ = try Deployment.create(at: directory)
        }
        let config = directory + "/" + Deployment.configFile
        let text = try String(contentsOfFile: config, encoding: .utf8)
            .replacingOccurrences(of: "password.iterations = \(PasswordHash.defaultIterations)",
                                  with: "password.iterations = \(TemporaryDeployment.passwordIterations)")
        try Deployment.writePrivate(config, text)
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
        let writer = try SQLitePayloadWriter(path: StoreFiles.databasePath(directory))
        guard try writer.addUser(name, passwordHash: hash.encoded, nowMs: UInt64(Date().timeIntervalSince1970 * 1000)) else {
            throw ServiceError.failed("user \(name) already exists")
        }
    }

    /// A fresh provider credential for the store or the gateway (each accepts it once).
    public func providerCredential(for audience: CredentialAudience) -> [UInt8] {
        HelloCredential.provider(deployment.providerKey).make(for: audience, nowMs: UInt64(Date().timeIntervalSince1970 * 1000))
    }

    /// A device registration signed with this deployment's server key.
    public func registration(_ device: String, user: String = "alice", tags: [String] = [], lifetimeMs: UInt64 = 86_400_000) -> [UInt8] {
        let signer = CredentialSigner(serverKey: deployment.serverKey, purpose: CredentialSigner.registrationPurpose)
        let now = UInt64(Date().timeIntervalSince1970 * 1000)
        return Registration(deviceID: device, user: user, tags: tags, issuedAt: now, expiresAt: now + lifetimeMs).signed(by: signer)
    }
}
