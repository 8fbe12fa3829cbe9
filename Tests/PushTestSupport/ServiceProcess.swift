import Foundation
import PushClient
import PushProcess
import PushSecurity
import PushWire

/// The `securepush` executable next to the test bundle, run as real child processes.
public enum SecurePushBinary {
    public static let path: String = {
        let bundleDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let candidates = [
            bundleDirectory.appendingPathComponent("securepush").path,
            URL(fileURLWithPath: ChildProcess.currentExecutable).deletingLastPathComponent().appendingPathComponent("securepush").path,
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? candidates[0]
    }()

    /// Runs a command to completion with optional stdin; returns exit status and output.
    @discardableResult
    public static func run(_ arguments: [String], stdin: String? = nil, timeoutSeconds: Double = 60) throws -> (status: Int32, stdout: String, stderr: String) {
        try ChildProcess.run(executable: path, arguments: arguments, stdinText: stdin, seconds: timeoutSeconds)
    }
}

/// A temporary deployment directory made by `securepush init`, removed on deinit.
public final class TemporaryDeployment {
    public let directory: String
    public let deployment: Deployment

    public init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("securepush-test-\(UUID().uuidString)").path
        let result = try SecurePushBinary.run(["init", directory])
        guard result.status == 0 else { throw ServiceError.failed("init: \(result.stderr)") }
        // Fast hashes keep the tests quick; production keeps the default.
        let config = directory + "/" + Deployment.configFile
        let text = try String(contentsOfFile: config, encoding: .utf8).replacingOccurrences(of: "password.iterations = 210000", with: "password.iterations = 1000")
        try Deployment.writePrivate(config, text)
        deployment = try Deployment.open(directory)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    public func addUser(_ name: String, password: String) throws {
        let result = try SecurePushBinary.run(["user", "add", name, "--data-dir", directory], stdin: password + "\n")
        guard result.status == 0 else { throw ServiceError.failed("user add: \(result.stderr)") }
    }

    public func providerCredential() -> [UInt8] {
        ProviderCredential.make(providerKey: deployment.providerKey, nowMs: UInt64(Date().timeIntervalSince1970 * 1000))
    }
}

public enum ServiceError: Error, CustomStringConvertible {
    case failed(String)
    public var description: String {
        switch self {
        case .failed(let text): text
        }
    }
}

/// A running `securepush` service (store or gateway) on a free port of 127.0.0.1.
public final class ServiceProcess {
    public let child: ChildProcess
    public private(set) var port = 0
    /// The port of a `metrics on HOST:PORT` line printed before `listening on`.
    public private(set) var announcedMetricsPort: Int?
    public let host = "127.0.0.1"

    /// Starts `securepush ARGUMENTS --listen 127.0.0.1:0` and waits for its `listening on` line.
    public init(_ arguments: [String]) throws {
        child = try ChildProcess(executable: SecurePushBinary.path, arguments: arguments + ["--listen", "127.0.0.1:0"])
        let address = try child.waitForLine(prefix: "listening on ", seconds: 30)
        guard let port = Int(address.split(separator: ":").last ?? "") else { throw ServiceError.failed("bad address \(address)") }
        self.port = port
        for line in child.standardOutput.split(separator: "\n") where line.hasPrefix("metrics on ") {
            announcedMetricsPort = Int(line.split(separator: ":").last ?? "")
        }
    }

    public func connect(timeoutMs: Int32 = 5_000) throws -> BlockingWireClient {
        try BlockingWireClient(host: host, port: port, timeoutMs: timeoutMs)
    }

    /// SIGTERM, then the exit status (or nil if it did not exit in time).
    public func terminate(timeoutSeconds: Double = 15) -> Int32? {
        child.signal(SIGTERM)
        return child.wait(seconds: timeoutSeconds)
    }

    public func killHard() { child.killHard() }

    /// What the service wrote to stderr (its logs).
    public func standardErrorText() -> String { child.standardError }
}
