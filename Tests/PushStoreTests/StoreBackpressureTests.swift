import PushStoreLogic
import Testing
import PushClient
import PushStore
import PushTestSupport
import PushWire

@Suite("The store's back-pressure", .ownThread)
struct StoreBackpressureTests {
    @Test("a device with 1,000 FETCHes of 4,096-byte payloads in flight that reads none of the replies is paused, not cut, and then gets them all")
    func pipelinedFetchesAreNotCut() throws {
        let store = try RunningStore()
        let provider = try store.provider()
        let payload = String(repeating: "p", count: StoreSettings().maxPayloadBytes)
        let ids = try (0..<50).map { _ in try store.store(payload, via: provider) }
        let token = try store.login("alice")
        // A small receive buffer: about 4 MB of replies cannot hide in the kernel. A send
        // buffer with room for all 1,000 requests (about 200 KB): once the store holds its
        // reads, what it has not read waits there, and a send blocked on it would be this
        // test's own deadlock, not the store's.
        let device = try store.reachable.connect(timeoutMs: 10_000, receiveBufferBytes: 16 * 1024, sendBufferBytes: 1 << 20)
        guard case .helloOK = try device.hello(Hello(role: .device)) else { Issue.record("HELLO refused"); return }
        let count = 1_000
        for index in 0..<count { try device.send(.fetch(Fetch(id: ids[index % ids.count], token: token))) }
        var fetched = 0
        for _ in 0..<count {
            guard case .fetchOK(let reply) = try device.receive(timeoutMs: 10_000).message else { break }
            if reply.payload.count == payload.utf8.count { fetched += 1 }
        }
        #expect(fetched == count)
        #expect(try device.request(.ping) == .pong, "the connection stayed open")
    }
}
