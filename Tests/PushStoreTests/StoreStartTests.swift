import Testing
import PushEventLoop
import PushStore
import PushTestSupport

/// Starts a store on a loop of the calling thread and returns why it failed, if it did.
private func startFailure(_ configuration: StoreConfiguration) throws -> StoreServiceError? {
    let loop = try EventLoop()
    defer { loop.shutdown() }
    do {
        let service = try StoreService.start(configuration, on: loop)
        service.stop()
        return nil
    } catch {
        return error
    }
}

@Suite("Starting a store", .ownThread)
struct StoreStartTests {
    @Test("a database that cannot be opened fails the start and names the file")
    func missingDirectory() throws {
        let deployment = try TemporaryDeployment()
        var configuration = StoreConfiguration(deployment: deployment.deployment, host: "127.0.0.1", port: 0)
        configuration.databasePath = deployment.directory + "/no-such-directory/store.sqlite"
        guard case .cannotStartSQLite(.cannotOpen(let path, _))? = try startFailure(configuration) else {
            Issue.record("the store started without its database"); return
        }
        #expect(path == configuration.databasePath)
    }

    @Test("a port already taken fails the start")
    func portTaken() throws {
        let deployment = try TemporaryDeployment()
        let running = try InProcessStore(deployment)
        let configuration = StoreConfiguration(deployment: deployment.deployment, host: "127.0.0.1", port: running.port)
        guard case .cannotListen(_, let port, _)? = try startFailure(configuration) else {
            Issue.record("two stores listen on one port"); return
        }
        #expect(port == running.port)
    }

    @Test("a payload limit no frame can carry is refused before anything starts", arguments: [0, 16 * 1024 * 1024])
    func impossiblePayloadLimit(maxPayloadBytes: Int) throws {
        let deployment = try TemporaryDeployment()
        var configuration = StoreConfiguration(deployment: deployment.deployment, host: "127.0.0.1", port: 0)
        configuration.settings.maxPayloadBytes = maxPayloadBytes
        guard case .invalidConfiguration? = try startFailure(configuration) else {
            Issue.record("started with a payload limit of \(maxPayloadBytes)"); return
        }
    }

    @Test("the deployment's config file sets the payload limit and the token lifetime")
    func deploymentSettings() throws {
        let deployment = try TemporaryDeployment()
        let configuration = StoreConfiguration(deployment: deployment.deployment, host: "127.0.0.1", port: 0)
        #expect(configuration.settings.maxPayloadBytes == deployment.deployment.integer("store.max_payload_bytes"))
        #expect(configuration.settings.tokenLifetimeMs == UInt64(deployment.deployment.integer("store.token_lifetime_s") ?? 0) * 1000)
    }
}
