import Foundation
import PushClient
import PushProcess
import PushSecurity
import PushTestSupport
import PushWire
import Testing

/// Issue 28, item 1: a device restarted with the same state directory shows nothing it
/// showed before, when a push names such a payload again (a cluster that handed a queue on
/// twice, a provider's retry).
@Suite("securepush device run, restarted", .ownThread, .serialized)
struct DeviceRunRestartTests {
    @Test("`device run` restarted with its state directory: a push of a payload it showed is not shown again, a new one is")
    func restartShowsNothingTwice() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let store = try ServiceProcess(["store", "--data-dir", deployment.directory])
        // One push written at a time: the next is written only after the device's
        // DELIVERY_ACK, by which time it has asked the store for the one before, if it would.
        let gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory, "--delivery-window", "1"])
        let storeProvider = try store.connect()
        guard case .helloOK = try storeProvider.hello(Hello(role: .provider, credential: deployment.providerCredential(for: .store))) else {
            Issue.record("the store refused the provider"); return
        }
        let pusher = try gateway.connect()
        guard case .helloOK = try pusher.hello(Hello(role: .provider, credential: deployment.providerCredential(for: .gateway))) else {
            Issue.record("the gateway refused the provider"); return
        }
        func stored(_ text: String) throws -> PayloadID {
            guard case .storeOK(let ok) = try storeProvider.request(.store(StoreRequest(user: "alice", payload: Array(text.utf8)))) else {
                throw ServiceError.failed("STORE \(text) refused")
            }
            return ok.id
        }
        func push(_ id: PayloadID) throws -> PushAck {
            guard case .pushAck(let ack) = try pusher.request(.push(Push(target: .device("phone"), id: id.bytes))) else {
                throw ServiceError.failed("PUSH refused")
            }
            return ack
        }

        let first = try DeviceRunProcess(deployment: deployment, device: "phone", user: "alice", password: "alice-pw",
                                         registration: deployment.registration("phone"), store: store,
                                         gatewayAddress: "127.0.0.1:\(gateway.port)")
        #expect(waitUntil(timeoutSeconds: 30) { first.gatewayConnections >= 1 })
        let shownBefore = try stored("shown before the restart")
        #expect(try push(shownBefore) == PushAck(written: 1, queued: 0))
        #expect(waitUntil(timeoutSeconds: 10) { first.shownCount == 1 }, "\(first.child.standardErrorTail)")
        #expect(waitUntil(timeoutSeconds: 10) { nothingUnread(store: store, token: first.token) }, "acknowledged to the store")
        let firstLines = first.stopAndCollect()
        #expect(firstLines.map(\.id) == [shownBefore.hex])

        let second = try DeviceRunProcess(restarting: first)
        #expect(waitUntil(timeoutSeconds: 30) { second.gatewayConnections >= 1 })
        // The payload is still in the store (unlimited reads), so a device that forgot it
        // fetches and shows it again.
        #expect(try push(shownBefore) == PushAck(written: 1, queued: 0))
        let new = try stored("new after the restart")
        let newAck = try push(new)
        #expect(newAck.written + newAck.queued == 1)
        #expect(waitUntil(timeoutSeconds: 10) { second.shownCount >= 1 }, "\(second.child.standardErrorTail)")
        let secondLines = second.stopAndCollect()
        #expect(secondLines.map(\.id) == [new.hex], "shown after the restart: \(secondLines)")
        let file = (try? Deployment.readFile(first.stateDirectory + "/" + ShownIDFile.fileName)) ?? ""
        #expect(file == shownBefore.hex + "\n" + new.hex + "\n")
    }

    @Test("the shown-id file keeps the newest ids: past twice its capacity it is rewritten with the newest, and skips damaged lines")
    func shownFileIsBounded() throws {
        let deployment = try TemporaryDeployment()
        let directory = deployment.directory + "/device-state"
        try Deployment.makeDirectories(directory)
        let ids = (1...8).map { PayloadID(high: 0, low: UInt64($0)) }
        let file = ShownIDFile(directory: directory, capacity: 3)
        #expect(file.load() == [])
        var remembered: [PayloadID] = []
        for id in ids {
            remembered.append(id)
            try file.append(id) { Array(remembered.suffix(3)) }
        }
        // The sixth line made it rewrite the file with the newest 3; two more followed.
        let text = try Deployment.readFile(file.path)
        #expect(text == ids[3...].map { $0.hex + "\n" }.joined())
        #expect(ShownIDFile(directory: directory, capacity: 3).load() == Array(ids.suffix(3)))
        #expect(ShownIDFile(directory: directory, capacity: 10).load() == Array(ids.suffix(5)))
        try Deployment.writePrivate(file.path, "not an id\n" + ids[0].hex + "\n" + String(ids[1].hex.prefix(20)) + "\n")
        #expect(ShownIDFile(directory: directory).load() == [ids[0]])
    }
}
