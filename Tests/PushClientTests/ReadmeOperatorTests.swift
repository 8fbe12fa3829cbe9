import Foundation
import Testing
import PushProcess
import PushTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// README.md's operator walk-through ("Running it for real") as one bash script, run as
/// written but for what a test must not touch: the deployment directory, HOME and the
/// install prefix are temporary, the fixed ports are free ones, and the install script
/// installs the binary under test instead of building a release one.
final class OperatorWalkthrough {
    let root: String
    let script: String
    /// The file the `device run` command's stdout goes to.
    let deviceOutput: String
    /// What `send --text` pushes.
    let expectedText: String
    /// The free port that stands for each port the README writes (`"7070"` → 41234).
    let ports: [String: Int]
    private(set) var shell: ChildProcess?

    /// - Parameters:
    ///   - substitutions: text replaced in every command after the ports were (a database
    ///     URL of the README by the test's own).
    ///   - environment: exported before the first command.
    ///   - input: for a command containing the key, what is typed at its prompts: piped
    ///     to it on stdin.
    init(commands: [String], substitutions: [String: String] = [:], environment: [String: String] = [:],
         input: [String: String] = [:]) throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("securepush-readme-\(UUID().uuidString)").path
        var ports: [String: Int] = [:]
        var lines = OperatorWalkthrough.prelude(root: root)
        for (name, value) in environment.sorted(by: { $0.key < $1.key }) { lines.append("export \(name)=\(quoted(value))") }
        var device: String?
        var text: String?
        for (index, written) in commands.enumerated() {
            var command = Readme.withoutComment(written).replacingOccurrences(of: "/srv/push", with: root + "/srv/push")
            for match in command.matches(of: /127\.0\.0\.1:(\d+)/) {
                let port = String(match.output.1)
                if ports[port] == nil { ports[port] = try readmeFreePort() }
                command = command.replacingOccurrences(of: "127.0.0.1:\(port)", with: "127.0.0.1:\(ports[port] ?? 0)")
            }
            // nats-server takes its port as -p PORT: the same free port as its nats:// URLs.
            if command.contains("nats-server "), let match = command.firstMatch(of: /-p (\d+)/) {
                let port = String(match.output.1)
                if ports[port] == nil { ports[port] = try readmeFreePort() }
                command = command.replacingOccurrences(of: "-p \(port)", with: "-p \(ports[port] ?? 0)")
            }
            if command != "scripts/install.sh" {
                let program = command.hasPrefix("printf ") ? command.split(separator: "|", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "" : command
                guard Self.runnablePrefixes.contains(where: { program.hasPrefix($0) }) else {
                    throw ReadmeFailure("""
                        the walk-through runs `\(written)`: only securepush, curl and nats-server commands (with a printf for a \
                        password), PostgreSQL's createuser and createdb as postgres, the making of a directory, its copy and a password \
                        file, openssl req for certificates, and scripts/install.sh are run here
                        """)
                }
            }
            for (written, replacement) in substitutions { command = command.replacingOccurrences(of: written, with: replacement) }
            if command == "scripts/install.sh" {
                command = "SECUREPUSH_BINARY=\(quoted(SecurePushBinary.path)) \(quoted(Readme.repositoryRoot + "/scripts/install.sh")) \(quoted(root + "/prefix"))"
            }
            if let typed = input.first(where: { written.contains($0.key) })?.value {
                command = "printf %s \(quoted(typed)) | " + command
            }
            if let match = command.firstMatch(of: /--text "([^"]*)"/) { text = String(match.output.1) }
            lines.append("echo \(quoted("+ " + written)) >&2")
            if command.hasSuffix("&"), !command.hasSuffix("&&") {
                let job = root + "/jobs/\(index)"
                lines.append("\(command.dropLast()) > \(quoted(job + ".out")) 2> \(quoted(job + ".err")) &")
                lines.append("pids+=($!); echo $! > \(quoted(job + ".pid"))")
                if command.contains("securepush store ") || command.contains("securepush gateway ") {
                    lines.append("ready \(quoted(job)) $!")
                }
                if command.contains("securepush device run ") { device = job + ".out" }
            } else {
                lines.append(command)
            }
        }
        // Every foreground command has succeeded once this file exists (the script is
        // strict); then it waits for the background jobs until the test stops it.
        lines.append("touch \(quoted(root + "/foreground-done"))")
        lines.append("wait")
        guard let device, let text else {
            throw ReadmeFailure("the walk-through has no `securepush device run ... &` or no `send --text \"...\"`")
        }
        deviceOutput = device
        expectedText = text
        self.ports = ports
        script = root + "/walkthrough.sh"
        // Only now, so that a walk-through the test refuses leaves nothing behind.
        do {
            for directory in ["home", "work", "prefix", "jobs"] {
                try FileManager.default.createDirectory(atPath: root + "/" + directory, withIntermediateDirectories: true)
            }
            try (lines.joined(separator: "\n") + "\n").write(toFile: script, atomically: true, encoding: .utf8)
        } catch {
            try? FileManager.default.removeItem(atPath: root)
            throw error
        }
    }

    /// What a README command may start with (after a `printf ... |`).
    static let runnablePrefixes = [
        "securepush ", "curl ", "nats-server ", "sudo -u postgres createuser ", "sudo -u postgres createdb ", "install -d ", "(umask 077 ",
        "openssl req ", "cp -a ",
    ]

    /// Strict bash; the README's background jobs stopped in reverse order with SIGTERM
    /// when the script ends or is told to, each exit status written to `exits`.
    private static func prelude(root: String) -> [String] {
        [
            "set -euo pipefail",
            "export HOME=\(quoted(root + "/home")) PATH=\(quoted(root + "/prefix/bin")):\"$PATH\"",
            "cd \(quoted(root + "/work"))",
            "pids=()",
            "stop_jobs() {",
            "  local index status",
            "  for ((index=${#pids[@]}-1; index>=0; index--)); do",
            "    kill -TERM \"${pids[index]}\" 2>/dev/null || true",
            "    status=0; wait \"${pids[index]}\" || status=$?",
            "    echo \"job $index exited $status\" >> \(quoted(root + "/exits"))",
            "  done",
            "}",
            "trap stop_jobs EXIT",
            "trap 'exit 0' TERM",
            "ready() {  # JOB PID: a service is ready once it prints `listening on`, as the README says",
            "  local tries=0",
            "  until grep -qs '^listening on ' \"$1.out\"; do",
            "    kill -0 \"$2\" 2>/dev/null || { echo \"it exited before listening: $(cat \"$1.err\")\" >&2; return 1; }",
            "    tries=$((tries + 1)); [ \"$tries\" -lt 600 ] || { echo 'not listening after 60 s' >&2; return 1; }",
            "    sleep 0.1",
            "  done",
            "}",
        ]
    }

    /// Runs the script in a session of its own, so every process it starts can be found.
    func start() throws {
        shell = try ChildProcess(executable: "/usr/bin/setsid", arguments: ["bash", script], name: "README walk-through")
    }

    var foregroundDone: Bool { FileManager.default.fileExists(atPath: root + "/foreground-done") }

    var deviceText: String { (try? String(contentsOfFile: deviceOutput, encoding: .utf8)) ?? "" }

    /// The script's trace and errors, and each background job's stderr.
    var diagnostics: String {
        var parts = ["script stderr:\n" + (shell?.standardError ?? "")]
        let jobs = (try? FileManager.default.contentsOfDirectory(atPath: root + "/jobs")) ?? []
        for name in jobs.sorted() where name.hasSuffix(".err") {
            parts.append("\(name):\n" + ((try? String(contentsOfFile: root + "/jobs/" + name, encoding: .utf8)) ?? ""))
        }
        return parts.joined(separator: "\n")
    }

    /// Whether a background job has exited (before the script was told to stop them).
    var aJobExited: Bool {
        let jobs = (try? FileManager.default.contentsOfDirectory(atPath: root + "/jobs")) ?? []
        return jobs.contains { name in
            guard name.hasSuffix(".pid"),
                  let text = try? String(contentsOfFile: root + "/jobs/" + name, encoding: .utf8),
                  let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { return false }
            return kill(pid, 0) != 0 && errno == ESRCH
        }
    }

    /// Waits until the device showed the text and the commands after it are done, or a
    /// command or job failed first; true only in the first case.
    func waitUntilShown(timeoutSeconds: Double = 120) -> Bool {
        waitUntil(timeoutSeconds: timeoutSeconds) {
            (deviceText.contains(expectedText) && foregroundDone) || shell?.hasExited == true || aJobExited
        } && deviceText.contains(expectedText) && foregroundDone
    }

    var exits: [String] {
        ((try? String(contentsOfFile: root + "/exits", encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// SIGTERM to the script (its trap stops the jobs and waits for them), then SIGKILL to
    /// whatever of its session is left; the script's exit status.
    func stop() -> Int32? {
        guard let shell else { return nil }
        if let stopped { return stopped }
        shell.signal(SIGTERM)
        let status = shell.wait(seconds: 30)
        kill(-shell.pid, SIGKILL)
        shell.killHard()
        stopped = status ?? -1
        return status
    }
    private var stopped: Int32?

    deinit {
        _ = stop()
        try? FileManager.default.removeItem(atPath: root)
    }
}

/// Single-quoted for bash.
private func quoted(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

@Suite("README: the operator's walk-through runs as written", .ownThread)
struct ReadmeOperatorTests {
    static let heading = "## Running it for real"

    @Test("install, init, user add, store, gateway, enroll, login, device run, send: the device prints the pushed text",
          .timeLimit(.minutes(3)))
    func walkthrough() throws {
        let commands = Readme.commands(Readme.shellBlocks(in: try Readme.text(), heading: Self.heading))
        #expect(commands.contains("scripts/install.sh"), "the section says how securepush gets on PATH")
        let walkthrough = try OperatorWalkthrough(commands: commands)
        try walkthrough.start()
        let shown = walkthrough.waitUntilShown()
        let failedEarly = walkthrough.shell?.hasExited == true || walkthrough.aJobExited
        let status = walkthrough.stop()
        #expect(shown && !failedEarly && walkthrough.deviceText.contains(walkthrough.expectedText),
                "the device did not show \(walkthrough.expectedText.debugDescription); device stdout: \(walkthrough.deviceText.debugDescription)\n\(walkthrough.diagnostics)")
        #expect(walkthrough.foregroundDone, "a command after the device showed the text failed\n\(walkthrough.diagnostics)")
        #expect(status == 0, "the script exited \(String(describing: status))\n\(walkthrough.diagnostics)")
        let backgroundJobs = commands.filter { Readme.withoutComment($0).hasSuffix("&") }.count
        #expect(walkthrough.exits.count == backgroundJobs, "\(walkthrough.exits)")
        for line in walkthrough.exits { #expect(line.hasSuffix(" exited 0"), "SIGTERM: \(line)\n\(walkthrough.diagnostics)") }
    }

    @Test("a gateway cluster over NATS: nats-server, a store, three gateway nodes; the device on node 3 shows what was sent through node 1",
          .enabled(if: NATSServer.available), .timeLimit(.minutes(3)))
    func clusterWalkthrough() throws {
        let commands = Readme.commands(Readme.shellBlocks(in: try Readme.text(), heading: "### A gateway cluster over NATS"))
        #expect(commands.filter { $0.contains("--cluster nats://") }.count == 3)
        let walkthrough = try OperatorWalkthrough(commands: ["scripts/install.sh"] + commands)
        try walkthrough.start()
        let shown = walkthrough.waitUntilShown()
        let status = walkthrough.stop()
        #expect(shown && walkthrough.foregroundDone && walkthrough.deviceText.contains(walkthrough.expectedText),
                "device stdout: \(walkthrough.deviceText.debugDescription)\n\(walkthrough.diagnostics)")
        #expect(status == 0, "the script exited \(String(describing: status))\n\(walkthrough.diagnostics)")
        // nats-server exits 1 on SIGTERM by design; the securepush services must exit 0.
        let background = commands.filter { Readme.withoutComment($0).hasSuffix("&") }
        let natsJob = try #require(background.firstIndex { $0.hasPrefix("nats-server ") })
        for line in walkthrough.exits where !line.hasPrefix("job \(natsJob) ") {
            #expect(line.hasSuffix(" exited 0"), "SIGTERM: \(line)\n\(walkthrough.diagnostics)")
        }
    }

    @Test("a cluster over NATS with TLS and a password: a CA and certificates by openssl, nats-server verifying clients, two nodes; the device on node 2 shows what was sent through node 1; the password is in no log",
          .enabled(if: NATSServer.available), .timeLimit(.minutes(3)))
    func securedClusterWalkthrough() throws {
        let commands = Readme.commands(Readme.shellBlocks(in: try Readme.text(), heading: "#### The links to NATS: TLS and credentials"))
        let nodes = commands.filter { $0.contains("--cluster tls://") }
        #expect(nodes.count == 2 && nodes.allSatisfy { $0.contains("--nats-password-file ") && $0.contains("--nats-cert ") })
        let password = "nats-walkthrough-\(UInt32.random(in: 1...UInt32.max))"
        let walkthrough = try OperatorWalkthrough(commands: ["scripts/install.sh"] + commands, input: ["read -rs password": password + "\n"])
        try walkthrough.start()
        let shown = walkthrough.waitUntilShown()
        let status = walkthrough.stop()
        #expect(shown && walkthrough.foregroundDone && walkthrough.deviceText.contains(walkthrough.expectedText),
                "device stdout: \(walkthrough.deviceText.debugDescription)\n\(walkthrough.diagnostics)")
        #expect(status == 0, "the script exited \(String(describing: status))\n\(walkthrough.diagnostics)")
        #expect(!walkthrough.diagnostics.contains(password), "a log shows the NATS password")
        let background = commands.filter { Readme.withoutComment($0).hasSuffix("&") }
        let natsJob = try #require(background.firstIndex { $0.hasPrefix("nats-server ") })
        for line in walkthrough.exits where !line.hasPrefix("job \(natsJob) ") {
            #expect(line.hasSuffix(" exited 0"), "SIGTERM: \(line)\n\(walkthrough.diagnostics)")
        }
    }

    @Test("the section's blocks are found by its heading, not past the next one, and lines are joined")
    func parsing() {
        let markdown = """
        ## Running it for real
        text
        ```sh
        a one # note
        b \\
            two
        ```
        ```
        # not a heading, and not a sh block
        ```
        ### Next
        ```sh
        c
        ```
        """
        let commands = Readme.commands(Readme.shellBlocks(in: markdown, heading: "## Running it for real"))
        #expect(commands == ["a one # note", "b      two"])
        #expect(Readme.withoutComment("send --text \"a # b\" # note") == "send --text \"a # b\"")
    }
}
