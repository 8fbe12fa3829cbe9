import Foundation
import PushStore
import PushStoreLogic
import PushTestSupport
import Testing

/// `securepush provider token` as an operator runs it, on a SQLite deployment.
@Suite("securepush provider token", .ownThread)
struct ProviderTokenCommandTests {
    private func token(_ arguments: [String], _ deployment: TemporaryDeployment) throws -> (status: Int32, stdout: String, stderr: String) {
        try SecurePushBinary.run(["provider", "token"] + arguments + ["--data-dir", deployment.directory])
    }

    @Test("create prints the token alone on stdout and says on stderr it is shown once; list shows it active, then revoked; revoke says what it revoked")
    func lifecycle() throws {
        let deployment = try TemporaryDeployment(commandLine: true)
        let created = try token(["create", "billing"], deployment)
        #expect(created.status == 0, "\(created.stderr)")
        #expect(created.stdout.hasSuffix("\n") && created.stdout.filter { $0 == "\n" }.count == 1)
        let text = String(created.stdout.dropLast())
        let parsed = try #require(APIToken.parse(text), "stdout is the token alone: \(created.stdout)")
        #expect(created.stderr.contains("shown only this once") && created.stderr.contains(parsed.id))
        #expect(!created.stderr.contains(text))
        let other = try token(["create", "crm.eu-1"], deployment)
        #expect(other.status == 0)

        let list = try token(["list"], deployment)
        #expect(list.status == 0, "\(list.stderr)")
        let lines = list.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        #expect(lines.first?.hasPrefix("ID") == true && lines.first?.contains("PROVIDER") == true && lines.first?.contains("STATE") == true)
        let billing = try #require(lines.first { $0.hasPrefix(parsed.id) })
        #expect(billing.contains(" billing ") && billing.hasSuffix("active"))
        #expect(billing.range(of: #"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"#, options: .regularExpression) != nil, "created, ISO 8601 UTC: \(billing)")
        #expect(!list.stdout.contains(String(text.suffix(43))), "list never shows a secret")

        let revoked = try token(["revoke", parsed.id], deployment)
        #expect(revoked.status == 0, "\(revoked.stderr)")
        #expect(revoked.stdout.contains("revoked API token \(parsed.id) of provider billing"))
        let again = try token(["revoke", parsed.id], deployment)
        #expect(again.status == 0 && again.stdout.contains("already revoked"))
        let after = try token(["list"], deployment)
        let line = try #require(after.stdout.split(separator: "\n").first { $0.hasPrefix(parsed.id) })
        #expect(line.contains("revoked at 20") && line.hasSuffix("Z"))
        #expect(after.stdout.split(separator: "\n").contains { $0.contains("crm.eu-1") && $0.hasSuffix("active") })
    }

    @Test("a bad provider name, an unknown or malformed id and a missing deployment fail with a message and a non-zero exit")
    func badInput() throws {
        let deployment = try TemporaryDeployment(commandLine: true)
        for name in ["bad name", "", "a/b", String(repeating: "x", count: 65)] {
            let result = try token(["create", name], deployment)
            #expect(result.status != 0 && result.stdout.isEmpty, "\(name)")
            #expect(result.stderr.contains("invalid provider name"), "\(result.stderr)")
        }
        for id in ["0123456789ab", "nonsense", "sp_0123456789ab"] {
            let result = try token(["revoke", id], deployment)
            #expect(result.status != 0 && result.stderr.contains("no API token with id"), "\(id): \(result.stderr)")
        }
        let list = try token(["list"], deployment)
        #expect(list.status == 0 && list.stdout.split(separator: "\n").count == 1, "nothing was created")

        let missing = deployment.directory + "/nowhere"
        for arguments in [["create", "billing"], ["list"], ["revoke", "0123456789ab"]] {
            let result = try SecurePushBinary.run(["provider", "token"] + arguments + ["--data-dir", missing])
            #expect(result.status != 0 && result.stdout.isEmpty && result.stderr.contains("no such directory"), "\(arguments): \(result.stderr)")
        }
        let noDirectory = try SecurePushBinary.run(["provider", "token", "list"])
        #expect(noDirectory.status != 0 && noDirectory.stderr.contains("--data-dir"))
    }
}
