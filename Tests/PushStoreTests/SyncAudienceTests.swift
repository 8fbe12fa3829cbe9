import PushClient
import PushStore
import PushTestSupport
import PushWire
import Testing

/// What SYNC shows (SPEC.md 4.9): only what was pushed to the device asking, newest first,
/// a page at a time, with the older ones counted rather than sent. Over real sockets, on
/// both backends.
@Suite("SYNC: audience and paging", .ownThread)
struct SyncAudienceTests {
    /// A store that accepts SEND: its gateway is an address nobody listens on, so the
    /// pushes wait in the outbox ([4.17-4]); what SYNC shows does not depend on them.
    static func sendingStore(_ backend: Backend) throws -> RunningStore {
        let nowhere = try freeLoopbackPort()
        return try RunningStore(backend) { $0.gateway = ServerLink.Endpoint(host: "127.0.0.1", port: nowhere) }
    }

    static func send(_ store: RunningStore, _ text: String, to target: PushTarget? = nil) throws -> PayloadID {
        let reply = try store.provider().request(.send(SendRequest(user: "alice", payload: Array(text.utf8), target: target)))
        guard case .sendOK(let ok) = reply else { throw ServiceError.failed("SEND refused: \(reply)") }
        return ok.id
    }

    static func sync(_ client: BlockingWireClient, _ token: [UInt8], cursor: UInt64 = 0, limit: UInt32 = Sync.defaultLimit) throws -> SyncOK {
        let reply = try client.request(.sync(Sync(token: token, cursor: cursor, limit: limit)))
        guard case .syncOK(let page) = reply else { throw ServiceError.failed("SYNC refused: \(reply)") }
        return page
    }

    @Test("[4.9-1] [4.9-4] [4.8-1] [4.10-1] a SEND to one device, or to a tag, is listed and readable only by the devices it was pushed to, not by the user's other devices nor by one enrolled afterwards",
          arguments: Backend.available)
    func audience(_ backend: Backend) throws {
        let store = try Self.sendingStore(backend)
        try store.deployment.enroll("phone", tags: ["work"])
        try store.deployment.enroll("decoy")
        try store.deployment.enroll("tablet", tags: ["home"])
        let code = try Self.send(store, "your code is 1234", to: .device("decoy"))
        let memo = try Self.send(store, "team meeting at 10", to: .tag("work"))
        let all = try Self.send(store, "for every device", to: .user("alice"))
        let stored = try store.store("stored for alice")
        // Enrolled after the pushes, with the tag: none of the targeted ones is for it.
        try store.deployment.enroll("laptop", tags: ["work"])

        let device = try store.device()
        let tokens = try ["phone", "decoy", "tablet", "laptop"].map { try store.login("alice", device: $0) }
        let listed = try tokens.map { try Self.sync(device, $0).ids }
        #expect(listed[0] == [stored, all, memo], "phone: the tag's, not the decoy's")
        #expect(listed[1] == [stored, all, code], "decoy: its own, not the tag's")
        #expect(listed[2] == [stored, all], "tablet: neither")
        #expect(listed[3] == [stored, all], "laptop, enrolled afterwards with the tag: neither")

        for (token, id, name) in [(tokens[0], code, "phone reads the decoy's"), (tokens[2], memo, "tablet reads the tag's"),
                                  (tokens[3], memo, "laptop reads the tag's")] {
            #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: token)))) == .forbidden, "\(name)")
            #expect(errorStatus(try device.request(.ack(Ack(id: id, token: token)))) == .forbidden, "\(name): ACK")
        }
        #expect(try device.request(.fetch(Fetch(id: code, token: tokens[1]))).type == .fetchOK)
        #expect(try device.request(.fetch(Fetch(id: memo, token: tokens[0]))).type == .fetchOK)
        #expect(try device.request(.fetch(Fetch(id: all, token: tokens[3]))).type == .fetchOK)
        #expect(try device.request(.ack(Ack(id: code, token: tokens[1]))).type == .ackOK)
        #expect(try Self.sync(device, tokens[1]).ids == [stored, all])
        let bob = try store.login("bob")
        #expect(errorStatus(try device.request(.fetch(Fetch(id: all, token: bob)))) == .forbidden)
    }

    @Test("[4.9-4] a SEND to a tag no device of the user has reaches no device's SYNC", arguments: Backend.available)
    func tagWithoutDevices(_ backend: Backend) throws {
        let store = try Self.sendingStore(backend)
        let nobody = try Self.send(store, "to nobody", to: .tag("nobody"))
        let token = try store.login("alice")
        let device = try store.device()
        #expect(try Self.sync(device, token).ids.isEmpty)
        #expect(errorStatus(try device.request(.fetch(Fetch(id: nobody, token: token)))) == .forbidden)
    }

    @Test("[4.9-1] [4.9-2] [4.9-3] [4.9-5] SYNC pages newest first; the first page counts the older unread ids it leaves out, later pages page on to them",
          arguments: Backend.available)
    func paging(_ backend: Backend) throws {
        let store = try RunningStore(backend)
        let provider = try store.provider()
        var ids: [PayloadID] = []
        for index in 0..<7 { ids.append(try store.store("m\(index)", via: provider)) }
        _ = try store.store("for bob", for: "bob", via: provider)
        let phone = try store.login("alice", device: "phone")
        let tablet = try store.login("alice", device: "tablet")
        let device = try store.device()
        #expect(try device.request(.ack(Ack(id: ids[5], token: phone))).type == .ackOK)

        let first = try Self.sync(device, phone, limit: 2)
        #expect(first.ids == [ids[6], ids[4]] && first.hasMore)
        #expect(first.olderCount == 4, "[4.9-5] ids 3, 2, 1 and 0 are older and not sent")
        let second = try Self.sync(device, phone, cursor: first.cursor, limit: 2)
        #expect(second.ids == [ids[3], ids[2]] && second.hasMore)
        #expect(second.olderCount == 0, "[4.9-5] counted on a listing's first page only")
        let third = try Self.sync(device, phone, cursor: second.cursor, limit: 2)
        #expect(third.ids == [ids[1], ids[0]] && !third.hasMore && third.olderCount == 0)

        let whole = try Self.sync(device, tablet, limit: 1000)
        #expect(whole.ids == ids.reversed() && !whole.hasMore && whole.olderCount == 0)
        let one = try Self.sync(device, tablet, limit: 0)
        #expect(one.ids == [ids[6]] && one.hasMore && one.olderCount == 6, "[4.9-3] a limit of 0 is 1")
        let capped = try Self.sync(device, tablet, limit: 5000)
        #expect(capped.ids.count == 7, "[4.9-3] a limit over 1000 is 1000")

        // Stored while a listing pages on: not in it, but first in the next one ([4.9-2]).
        let late = try store.store("late", via: provider)
        let rest = try Self.sync(device, tablet, cursor: one.cursor, limit: 1000)
        #expect(rest.ids == Array(ids.reversed().dropFirst()) && !rest.hasMore)
        #expect(try Self.sync(device, tablet, limit: 1).ids == [late])
    }
}
