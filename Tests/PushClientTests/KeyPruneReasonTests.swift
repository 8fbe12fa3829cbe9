import Foundation
import Testing
import PushClient
import PushTestSupport
import PushWire

/// Issue 42, item 4: `key prune` names every key it keeps and why, on both backends, also
/// right after `key rotate`, when it removes nothing.
@Suite("key prune says why it keeps each key", .ownThread, .serialized)
struct KeyPruneReasonTests {
    /// `securepush key ARGUMENTS --data-dir DIR`, which must succeed: its stdout's lines.
    private func key(_ arguments: [String], _ deployment: TemporaryDeployment) throws -> [String] {
        let result = try SecurePushBinary.run(["key"] + arguments + ["--data-dir", deployment.directory])
        guard result.status == 0 else { throw ServiceError.failed("key \(arguments.joined(separator: " ")): \(result.stderr)") }
        return result.stdout.split(separator: "\n").map(String.init)
    }

    /// A deployment made by `init` with alice and `count` payloads for her, stored by a
    /// store that is stopped again (so that no store re-seals behind the test's back).
    private func deployment(payloads count: Int, database: String? = nil) throws -> TemporaryDeployment {
        let deployment = try TemporaryDeployment(commandLine: true, database: database)
        try deployment.addUser("alice", password: "alice-pw")
        let store = try ServiceProcess(["store", "--data-dir", deployment.directory])
        let provider = try deployment.provider(store: store.port)
        for index in 0..<count {
            guard case .storeOK = try provider.request(.store(StoreRequest(user: "alice", payload: Array("payload \(index)".utf8)))) else {
                throw ServiceError.failed("STORE refused")
            }
        }
        #expect(store.terminate() == 0)
        return deployment
    }

    @Test("SQLite: right after key rotate, the old key is kept for its payloads and the new one as current; --reseal then removes the old one")
    func sqlite() throws {
        let deployment = try deployment(payloads: 3)
        _ = try key(["rotate"], deployment)
        #expect(try key(["prune"], deployment) == [
            "no data key removed",
            "kept data key 1: 3 payloads still sealed under it: a running store re-seals them in the background (`key prune --reseal` does it now)",
            "kept data key 2: still current (new payloads are sealed under it)",
        ])
        #expect(try key(["prune", "--reseal"], deployment) == [
            "removed data key 1",
            "kept data key 2: still current (new payloads are sealed under it)",
        ])
    }

    @Test("PostgreSQL: right after key rotate, the current key and the one not sealing yet; then the one superseded moments ago, with its payloads and when re-sealing begins",
          .enabled(if: PostgresCluster.testsEnabled), .timeLimit(.minutes(2)))
    func postgres() throws {
        let deployment = try deployment(payloads: 3, database: try PostgresCluster.shared().createDatabase())
        _ = try key(["rotate"], deployment)
        #expect(try key(["prune"], deployment) == [
            "no data key removed",
            "kept data key 1: still current (new payloads are sealed under it)",
            "kept data key 2: not sealing yet: every store seals under it from 2 seconds from now",
        ])
        #expect(waitUntil(timeoutSeconds: 10, pollMilliseconds: 100) {
            (try? key(["status"], deployment))?.contains { $0.hasPrefix("key 2: ") && $0.hasSuffix("(current)") } == true
        })
        let superseded = try key(["prune"], deployment)
        #expect(superseded.count == 3 && superseded.first == "no data key removed", "\(superseded)")
        let first = superseded.count > 1 ? superseded[1] : ""
        #expect(first.hasPrefix("kept data key 1: superseded less than 5 seconds ago (")
                && first.contains("): a store may still seal under it; it may go from ")
                && first.contains("; 3 payloads still sealed under it: re-sealing begins in "), "\(first)")
        #expect(superseded.last == "kept data key 2: still current (new payloads are sealed under it)")
        // Once settled, --reseal moves the payloads here and the key goes.
        #expect(waitUntil(timeoutSeconds: 15, pollMilliseconds: 500) {
            (try? key(["prune", "--reseal"], deployment))?.first == "removed data key 1"
        })
        #expect(try key(["prune"], deployment) == ["no data key removed", "kept data key 2: still current (new payloads are sealed under it)"])
    }
}
