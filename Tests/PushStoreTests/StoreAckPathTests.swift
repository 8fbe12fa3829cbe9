import Foundation
@testable import PushStoreLogic
import Testing
import PushWire
@testable import PushStore

/// ACK and RECALL name only the payload's sequence on the loop (from the in-memory map)
/// and leave every check of the row to the writer's transaction; a receipt that does not
/// reach the read limit updates the count alone.
@Suite("Store ACK and RECALL path")
struct StoreAckPathTests {
    @Test("[4.10-1] a read limit of 3 counts three devices: readable and listed by SYNC until the third receipt, then GONE and erased")
    func readLimitCountsEveryDevice() throws {
        let store = try StoreFixture()
        let id = try store.store("three", readLimit: 3)
        let device = store.session(.device)
        let tokens = try ["phone", "tablet", "laptop"].map { try store.token(device: $0) }
        let watch = try store.token(device: "watch")
        for (index, token) in tokens.enumerated() {
            #expect(try store.send(.ack(Ack(id: id, token: token)), on: device) == .ackOK(AckOK(id: id)))
            let row = try store.locate(id)
            #expect(row?.readCount == UInt32(index + 1))
            guard case .syncOK(let page)? = try store.send(.sync(Sync(token: watch)), on: device) else {
                Issue.record("SYNC failed"); return
            }
            if index < 2 {
                #expect(row?.life == .live && row?.body == Array("three".utf8))
                #expect(page.ids == [id], "still listed for a device that has not acknowledged it")
            } else {
                #expect(row?.life == .readOut && row?.body == [])
                #expect(page.ids.isEmpty)
            }
        }
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: watch)), on: device)) == .gone)
    }

    @Test("[4.10-2] [4.11-2] an ACK or RECALL of a payload whose row was forgotten is NOT_FOUND, decided by the writer")
    func forgottenRow() throws {
        let store = try StoreFixture()
        let id = try store.store("short", ttl: 1)
        let token = try store.token()
        _ = try store.writer.sweepExpired(nowMs: store.now + 2_000 + PayloadLife.tombstoneRetentionMs)
        #expect(status(of: try store.send(.ack(Ack(id: id, token: token)), on: store.session(.device))) == .notFound)
        #expect(status(of: try store.send(.recall(Recall(id: id)), on: store.session(.provider))) == .notFound)
    }

    @Test("[7.3-3] an ACK is still refused once its user is removed or its device revoked, though it reads no payload row")
    func ackStillChecksTheHolder() throws {
        let store = try StoreFixture()
        let id = try store.store("for alice", readLimit: 1)
        let device = store.session(.device)
        let phone = try store.token(device: "phone")
        try store.revoke("phone")
        #expect(status(of: try store.send(.ack(Ack(id: id, token: phone)), on: device)) == .badToken)
        let tablet = try store.token(device: "tablet")
        #expect(try store.writer.removeUser("alice", clock: { store.now }))
        #expect(status(of: try store.send(.ack(Ack(id: id, token: tablet)), on: device)) == .badToken)
    }

    @Test("[4.12-1] [4.8-3] FETCH statistics ride on the device's ACK: counted once, whether the ACK or a later batch writes them")
    func fetchStatisticsRideOnTheAck() throws {
        let store = try StoreFixture()
        let id = try store.store("counted")
        let other = try store.store("read out", readLimit: 1)
        let device = store.session(.device), provider = store.session(.provider)
        let phone = try store.token(device: "phone")
        func fetchCount(_ id: PayloadID) throws -> UInt32? {
            guard case .statusOK(let ok)? = try store.send(.status(StatusRequest(id: id)), on: provider) else { return nil }
            return ok.fetchCount
        }
        for _ in 0..<2 { #expect(status(of: try store.send(.fetch(Fetch(id: id, token: phone)), on: device)) == .ok) }
        #expect(status(of: try store.send(.fetch(Fetch(id: other, token: phone)), on: device)) == .ok)
        #expect(try fetchCount(id) == 2, "still on the loop")
        #expect(try store.send(.ack(Ack(id: id, token: phone)), on: device) == .ackOK(AckOK(id: id)))
        #expect(try store.send(.ack(Ack(id: other, token: phone)), on: device) == .ackOK(AckOK(id: other)))
        #expect(store.logic.pendingFetchTallies == 0, "both went with their receipts")
        #expect(try store.locate(id)?.fetchCount == 2 && store.locate(id)?.readCount == 1)
        #expect(try store.locate(other)?.fetchCount == 1 && store.locate(other)?.life == .readOut)
        // A FETCH after the receipt, and a repeated ACK that adds no receipt but carries it.
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: phone)), on: device)) == .ok)
        #expect(try store.send(.ack(Ack(id: id, token: phone)), on: device) == .ackOK(AckOK(id: id)))
        #expect(try store.locate(id)?.fetchCount == 3 && store.locate(id)?.readCount == 1)
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: phone)), on: device)) == .ok)
        _ = try store.writer.commit([.recordFetches(store.logic.takeFetchTallies())])
        #expect(try fetchCount(id) == 4)
    }
}
