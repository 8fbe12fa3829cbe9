import Foundation
import PushProcess

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

public enum ServiceError: Error, CustomStringConvertible {
    case failed(String)
    public var description: String {
        switch self {
        case .failed(let text): text
        }
    }
}

/// A running `securepush` service (store or gateway) on a free port of 127.0.0.1: for
/// the tests that are about the real binary (signals, exit codes, durability).
public final class ServiceProcess: ReachableService {
    public let child: ChildProcess
    public let port: Int
    /// The port of a `metrics on HOST:PORT` line printed before `listening on`.
    public let announcedMetricsPort: Int?
    /// The port of an `http api on HOST:PORT` line (a store with `--http`).
    public let announcedHTTPPort: Int?
    public let host = "127.0.0.1"

    /// Starts `securepush ARGUMENTS --listen LISTEN` and waits for its `listening on` line.
    /// - Parameter listen: 127.0.0.1:0 unless a test needs the service back on its port.
    /// - Parameter openFileLimit: run it under `ulimit -n` of this (a shell lowers the
    ///   limit, then becomes the service: the pid is the service's).
    public init(_ arguments: [String], listen: String = "127.0.0.1:0", openFileLimit: Int? = nil) throws {
        let full = arguments + ["--listen", listen]
        if let openFileLimit {
            child = try ChildProcess(executable: "/bin/sh",
                                     arguments: ["-c", "ulimit -n \(openFileLimit) && exec \"$0\" \"$@\"", SecurePushBinary.path] + full,
                                     name: arguments.first)
        } else {
            child = try ChildProcess(executable: SecurePushBinary.path, arguments: full)
        }
        let address = try child.waitForLine(prefix: "listening on ", seconds: 30)
        guard let port = Int(address.split(separator: ":").last ?? "") else { throw ServiceError.failed("bad address \(address)") }
        self.port = port
        let metricsLine = child.standardOutput.split(separator: "\n").last { $0.hasPrefix("metrics on ") }
        announcedMetricsPort = metricsLine.flatMap { Int($0.split(separator: ":").last ?? "") }
        let httpLine = child.standardOutput.split(separator: "\n").last { $0.hasPrefix("http api on ") }
        announcedHTTPPort = httpLine.flatMap { Int($0.split(separator: ":").last ?? "") }
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

extension ServiceProcess {
    /// One value of its /metrics (started with `--metrics 127.0.0.1:0`), nil when it has no
    /// such series or does not answer.
    public func metric(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        guard let port = announcedMetricsPort, let text = try? HTTPGet.metrics(port: port) else { return nil }
        return (try? MetricsExposition(parsing: text))?.value(name, labels)
    }
}
