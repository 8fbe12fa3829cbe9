import Foundation
import PushClient
import PushSecurity
import PushWire

/// The `securepush` executable next to the test bundle, run as real child processes.
public enum SecurePushBinary {
    public static let path: String = {
        let bundleDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let candidates = [
            bundleDirectory.appendingPathComponent("securepush").path,
            URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("securepush").path,
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? candidates[0]
    }()

    /// Runs a command to completion with optional stdin; returns exit status and output.
    @discardableResult
    public static func run(_ arguments: [String], stdin: String? = nil, timeoutSeconds: Double = 60) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let output = Pipe(), errors = Pipe(), input = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try input.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        let out = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let err = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return (process.terminationStatus, out, err)
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
    public let process = Process()
    public private(set) var port = 0
    /// The port of a `metrics on HOST:PORT` line printed before `listening on`.
    public private(set) var announcedMetricsPort: Int?
    public let host = "127.0.0.1"
    // Logs go to a file: a pipe nobody drains would block the service once full.
    private let logPath = FileManager.default.temporaryDirectory.appendingPathComponent("securepush-log-\(UUID().uuidString)").path
    private let output = Pipe()

    /// Starts `securepush ARGUMENTS --listen 127.0.0.1:0` and waits for its `listening on` line.
    public init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: SecurePushBinary.path)
        process.arguments = arguments + ["--listen", "127.0.0.1:0"]
        process.standardOutput = output
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: logPath)
        try process.run()
        let handle = output.fileHandleForReading
        var line = Data()
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            let byte = handle.readData(ofLength: 1)
            if byte.isEmpty { break }
            if byte.first == UInt8(ascii: "\n") {
                let text = String(decoding: line, as: UTF8.self)
                if text.hasPrefix("listening on "), let port = Int(text.split(separator: ":").last ?? "") {
                    self.port = port
                    return
                }
                if text.hasPrefix("metrics on ") { announcedMetricsPort = Int(text.split(separator: ":").last ?? "") }
                line.removeAll()
            } else {
                line.append(byte)
            }
        }
        process.terminate()
        throw ServiceError.failed("\(arguments.first ?? "service") did not start: \(standardErrorText())")
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: logPath)
    }

    public func connect(timeoutMs: Int32 = 5_000) throws -> BlockingWireClient {
        try BlockingWireClient(host: host, port: port, timeoutMs: timeoutMs)
    }

    /// SIGTERM, then the exit status (or nil if it did not exit in time).
    public func terminate(timeoutSeconds: Double = 15) -> Int32? {
        kill(process.processIdentifier, SIGTERM)
        return waitForExit(timeoutSeconds: timeoutSeconds)
    }

    /// What the service wrote to stderr (its logs), once it has exited.
    public func standardErrorText() -> String {
        (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
    }

    public func killHard() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    public func waitForExit(timeoutSeconds: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        guard !process.isRunning else { return nil }
        return process.terminationStatus
    }
}
