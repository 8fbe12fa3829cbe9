import Foundation
import PushSecurity
import PushStore
import PushTestSupport
import Testing

/// Names given on the command line and in the config file follow the protocol's rule
/// ([3.3-8]): a control character is refused with a message naming the option and a
/// non-zero exit, and nothing is recorded. (A process argument cannot hold a NUL, so these
/// cases use the other controls.)
@Suite("Names on the command line and in the config file", .ownThread)
struct IdentifierCommandTests {
    private func run(_ arguments: [String], _ deployment: TemporaryDeployment, stdin: String? = nil) throws -> (status: Int32, stdout: String, stderr: String) {
        try SecurePushBinary.run(arguments + ["--data-dir", deployment.directory], stdin: stdin)
    }

    @Test("[3.3-8] user add, device enroll and revoke refuse a name with a control character and record nothing; zoë passes")
    func deploymentCommands() throws {
        let deployment = try TemporaryDeployment(commandLine: true)
        for name in ["alice\tbob", "alice\n", "alice\u{7F}", "alice\u{85}"] {
            let added = try run(["user", "add", name], deployment, stdin: "pw\n")
            #expect(added.status != 0, "user add \(name.debugDescription): \(added.stdout)")
            #expect(added.stderr.contains("a user name may not contain a control character"), "\(added.stderr)")
        }
        let zoe = try run(["user", "add", "zoe\u{308}"], deployment, stdin: "pw\n")
        #expect(zoe.status == 0, "\(zoe.stderr)")
        #expect(try StoreDatabase(deployment.deployment).users().list(nowMs: 0).map { Array($0.name.utf8) } == [Array("zoe\u{308}".utf8)],
                "only zoë was added, in the bytes given")

        let out = deployment.directory + "/phone.credential"
        let cases: [([String], String)] = [
            (["--user", "zoe\u{308}", "--device", "phone\r1"], "--device: a device id may not contain a control character"),
            (["--user", "zoe\u{308}\u{1B}", "--device", "phone-1"], "--user: a user name may not contain a control character"),
            (["--user", "zoe\u{308}", "--device", "phone-1", "--tag", "news\r"], "--tag: a tag may not contain a control character"),
        ]
        for (options, message) in cases {
            let enrolled = try run(["device", "enroll"] + options + ["--out", out], deployment)
            #expect(enrolled.status != 0, "\(options)")
            #expect(enrolled.stderr.contains(message), "\(enrolled.stderr)")
            #expect(!FileManager.default.fileExists(atPath: out), "no credential written")
        }
        #expect(try StoreDatabase(deployment.deployment).registry().list(user: nil).isEmpty)
        let revoked = try run(["device", "revoke", "phone\t1"], deployment)
        #expect(revoked.status != 0 && revoked.stderr.contains("a device id may not contain a control character"), "\(revoked.stderr)")
    }

    @Test("[3.3-8] send refuses --to, --user, --collapse and --idempotency-key with a control character before connecting")
    func sendOptions() throws {
        let deployment = try TemporaryDeployment()
        let base = ["send", "--store", "127.0.0.1:1", "--provider-key", deployment.directory + "/" + Deployment.providerKeyFile, "--text", "hi"]
        let cases: [([String], String)] = [
            (["--to", "user:alice\u{1}"], "--to: a user name may not contain a control character"),
            (["--to", "tag:news\n"], "--to: a tag may not contain a control character"),
            (["--to", "device:phone-1", "--user", "alice\u{9F}"], "--user: a user name may not contain a control character"),
            (["--to", "user:alice", "--collapse", "otp\u{7F}"], "--collapse: a collapse key may not contain a control character"),
            (["--to", "user:alice", "--idempotency-key", "key\t1"], "--idempotency-key: an idempotency key may not contain a control character"),
        ]
        for (options, message) in cases {
            let result = try SecurePushBinary.run(base + options)
            #expect(result.status != 0, "\(options)")
            #expect(result.stderr.contains(message), "\(options): \(result.stderr)")
            #expect(!result.stderr.contains("cannot connect"), "refused before connecting: \(result.stderr)")
        }
    }

    @Test("[3.3-8] a config value with a control character is refused with its line, never cut at a NUL")
    func configValues() throws {
        for value in ["/srv/push/ca\u{0}.pem", "/srv/push/ca\u{1}.pem"] {
            #expect(throws: Deployment.Failure.self) {
                _ = try Deployment.parseConfig("gateway.nats_ca = \(value)\n", path: "securepush.conf")
            }
            do {
                _ = try Deployment.parseConfig("gateway.nats_ca = \(value)\n", path: "securepush.conf")
            } catch {
                #expect("\(error)".contains("securepush.conf:1") && "\(error)".contains("without control characters"), "\(error)")
            }
        }
        #expect(try Deployment.parseConfig("gateway.nats_ca = /srv/push/zoë.pem\n", path: "securepush.conf")["gateway.nats_ca"] == "/srv/push/zoë.pem")
    }
}
