import Foundation
import Testing
import PushClient
import PushTestSupport
import PushWire

/// `securepush store` as a child process, in a deployment made by `securepush init` and
/// `securepush user add`: for what only the real binary can show.
final class StoreProcess: StoreUnderTest {
    let deployment: TemporaryDeployment
    private(set) var service: ServiceProcess

    init() throws {
        deployment = try deploymentWithUsers(commandLine: true)
        service = try ServiceProcess(["store", "--data-dir", deployment.directory])
    }

    var reachable: any ReachableService { service }

    func restart() throws {
        service = try ServiceProcess(["store", "--data-dir", deployment.directory])
    }
}

@Suite("The store binary", .ownThread)
struct StoreProcessTests {
    @Test("[5.5-1] SIGTERM sends GOAWAY SHUTTING_DOWN, answers what was accepted and exits 0")
    func gracefulStop() throws {
        let store = try StoreProcess()
        let provider = try store.provider()
        let last = try provider.send(.store(StoreRequest(user: "alice", payload: [1, 2, 3])))
        #expect(try provider.request(.ping) == .pong)
        #expect(store.service.terminate() == 0)
        var replies: [Message] = []
        while let frame = try? provider.receive(timeoutMs: 1_000) { replies.append(frame.message) }
        #expect(replies.contains { if case .goaway(let g) = $0 { return g.status == .shuttingDown && g.lastCorrelation >= last } else { return false } })
        #expect(replies.contains { $0.type == .storeOK })
        #expect(!store.service.standardErrorText().isEmpty, "the store logs to stderr")
    }
}
