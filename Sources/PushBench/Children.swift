import PushProcess

/// The bench's child processes (`securepush init`, `user add`, the services) through
/// PushProcess, with its failures as BenchError.
enum Children {
    /// Runs a command to completion; throws with its stderr unless it exits 0.
    static func run(_ executable: String, _ arguments: [String], stdinText: String? = nil, seconds: Double = 120) throws(BenchError) {
        let result: (status: Int32, stdout: String, stderr: String)
        do {
            result = try ChildProcess.run(executable: executable, arguments: arguments, stdinText: stdinText, seconds: seconds)
        } catch {
            throw .child(error.description)
        }
        guard result.status == 0 else {
            let tail = result.stderr.split(separator: "\n").suffix(3).joined(separator: " | ")
            throw .child("\(arguments.first ?? executable) failed (status \(result.status)): \(tail)")
        }
    }

    /// Starts a long-running child.
    static func spawn(_ executable: String, _ arguments: [String], name: String) throws(BenchError) -> ChildProcess {
        do {
            return try ChildProcess(executable: executable, arguments: arguments, name: name)
        } catch {
            throw .child(error.description)
        }
    }

    /// Waits for a service's `PREFIX...` stdout line.
    static func line(_ child: ChildProcess, prefix: String, seconds: Double) throws(BenchError) -> String {
        do {
            return try child.waitForLine(prefix: prefix, seconds: seconds)
        } catch {
            throw .child(error.description)
        }
    }
}
