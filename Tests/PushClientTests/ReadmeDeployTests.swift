import Foundation
import Testing
import PushProcess
import PushTestSupport

/// `systemd-analyze`, where Debian's systemd package puts it; nil when it is not installed.
private let systemdAnalyze: String? = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"]
    .first { FileManager.default.isExecutableFile(atPath: $0) }

private let units = ["securepush-store.service", "securepush-gateway.service"]

@Suite("scripts/install.sh and the systemd units in deploy/", .ownThread)
struct ReadmeDeployTests {
    /// Runs scripts/install.sh into a temporary prefix with the binary under test.
    private func install() throws -> (prefix: String, output: String) {
        let prefix = FileManager.default.temporaryDirectory.appendingPathComponent("securepush-prefix-\(UUID().uuidString)").path
        let result = try ChildProcess.run(executable: "/usr/bin/env",
                                          arguments: ["SECUREPUSH_BINARY=\(SecurePushBinary.path)", "bash",
                                                      Readme.repositoryRoot + "/scripts/install.sh", prefix], seconds: 60)
        #expect(result.status == 0, "install.sh: \(result.stderr)")
        return (prefix, result.stdout)
    }

    @Test("install.sh puts the binary, the README and the units (pointing at PREFIX/bin) under PREFIX, and says so")
    func installScript() throws {
        let (prefix, output) = try install()
        defer { try? FileManager.default.removeItem(atPath: prefix) }
        let binary = prefix + "/bin/securepush"
        #expect(output.contains("installed \(binary)\n"))
        let attributes = try FileManager.default.attributesOfItem(atPath: binary)
        #expect((attributes[.posixPermissions] as? Int) == 0o755)
        let version = try ChildProcess.run(executable: binary, arguments: ["--help"], seconds: 30)
        #expect(version.status == 0)
        #expect(FileManager.default.fileExists(atPath: prefix + "/share/doc/securepush/README.md"))
        for unit in units {
            let path = prefix + "/lib/systemd/system/" + unit
            #expect(output.contains("installed \(path)\n"))
            let text = try String(contentsOfFile: path, encoding: .utf8)
            #expect(text.contains("ExecStart=\(binary) "), "\(unit) runs the installed binary")
            #expect(!text.contains("/usr/local/"), "\(unit) still names /usr/local")
        }
        let relative = try ChildProcess.run(executable: "/bin/bash", arguments: [Readme.repositoryRoot + "/scripts/install.sh", "relative/prefix"])
        #expect(relative.status == 2 && relative.stderr.contains("PREFIX must be an absolute path"))
    }

    @Test("the units run as the securepush user, hardened, and drain on SIGTERM")
    func hardening() throws {
        for unit in units {
            let text = try String(contentsOfFile: Readme.repositoryRoot + "/deploy/" + unit, encoding: .utf8)
            let lines = Set(text.split(separator: "\n").map(String.init))
            for required in ["User=securepush", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
                             "PrivateDevices=yes", "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX", "Restart=on-failure",
                             "KillSignal=SIGTERM", "CapabilityBoundingSet="] {
                #expect(lines.contains(required), "\(unit) lacks \(required)")
            }
            #expect(lines.contains { $0.hasPrefix("LimitNOFILE=") })
            #expect(!lines.contains { $0.hasPrefix("DynamicUser=") }, "the data directory must outlive the unit")
            let service = unit.contains("store") ? "store" : "gateway"
            #expect(lines.contains("ExecStart=/usr/local/bin/securepush \(service) --data-dir /var/lib/securepush"))
            // Only the store writes its directory.
            #expect(lines.contains("ReadWritePaths=/var/lib/securepush") == (service == "store"))
        }
    }

    @Test("systemd-analyze verify is clean for both units, as installed",
          .enabled(if: systemdAnalyze != nil, "systemd-analyze is not installed (Debian package systemd; .ci/run installs it)"))
    func systemdVerify() throws {
        let (prefix, _) = try install()
        defer { try? FileManager.default.removeItem(atPath: prefix) }
        let paths = units.map { prefix + "/lib/systemd/system/" + $0 }
        let result = try ChildProcess.run(executable: systemdAnalyze ?? "", arguments: ["verify"] + paths, seconds: 60)
        #expect(result.status == 0 && result.stdout.isEmpty && result.stderr.isEmpty,
                "systemd-analyze verify: status \(result.status)\n\(result.stdout)\(result.stderr)")

        // It does find faults: a unit whose binary is missing fails.
        let broken = prefix + "/broken.service"
        try String(contentsOfFile: paths[0], encoding: .utf8)
            .replacingOccurrences(of: prefix + "/bin/securepush", with: prefix + "/bin/missing")
            .write(toFile: broken, atomically: true, encoding: .utf8)
        let failed = try ChildProcess.run(executable: systemdAnalyze ?? "", arguments: ["verify", broken], seconds: 60)
        #expect(failed.status != 0)
    }
}
