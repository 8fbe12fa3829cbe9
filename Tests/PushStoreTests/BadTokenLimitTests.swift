@testable import PushStoreLogic
import Testing
import PushWire
@testable import PushStore

@Suite("Store logic: the failed-token limit")
struct BadTokenLimitTests {
    static func forged(_ token: [UInt8]) -> [UInt8] {
        var forged = token
        forged[forged.count - 1] ^= 1
        return forged
    }

    @Test("[8-5] BAD_TOKEN answers beyond 20 in 10 s make every token-bearing request from that address RATE_LIMITED until the window ends")
    func badTokensFromOneAddress() throws {
        let store = try StoreFixture()
        let id = try store.store("for alice")
        let token = try store.token()
        let forged = Self.forged(token)
        let attacker = StoreSession(peerAddress: "10.0.0.66", role: .device)
        let limit = store.logic.settings.badTokensPerAddress
        #expect(limit == 20 && store.logic.settings.badTokenWindowMs == 10_000, "the policy's defaults")

        // FETCH, SYNC and ACK all count.
        for index in 0..<limit {
            let request: Message = switch index % 3 {
            case 0: .fetch(Fetch(id: id, token: forged))
            case 1: .sync(Sync(token: forged, cursor: 0, limit: 10))
            default: .ack(Ack(id: id, token: forged))
            }
            #expect(status(of: try store.send(request, on: attacker)) == .badToken, "failure \(index + 1) is still answered")
        }
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: forged)), on: attacker)) == .rateLimited)
        // A good token from that address is refused too, on a connection that verified it before.
        let sameAddress = StoreSession(peerAddress: "10.0.0.66", role: .device)
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: token)), on: sameAddress)) == .rateLimited)
        #expect(status(of: try store.send(.sync(Sync(token: token, cursor: 0, limit: 10)), on: sameAddress)) == .rateLimited)
        #expect(status(of: try store.send(.ack(Ack(id: id, token: token)), on: sameAddress)) == .rateLimited)
        // A request with no token carries none to guess with: the usual answer.
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: nil)), on: sameAddress)) == .authRequired)

        // Other addresses are not affected.
        let neighbour = StoreSession(peerAddress: "10.0.0.67", role: .device)
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: token)), on: neighbour)) == .ok)
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: forged)), on: neighbour)) == .badToken)

        // The window is fixed from the first failure: just before its end still limited, then served.
        store.now += store.logic.settings.badTokenWindowMs - 1
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: token)), on: sameAddress)) == .rateLimited)
        store.now += 1
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: token)), on: sameAddress)) == .ok)
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: forged)), on: sameAddress)) == .badToken, "a new window starts")
    }

    @Test("[8-5] twenty BAD_TOKEN answers are allowed, and expired tokens do not count")
    func onlyBadTokensCount() throws {
        let store = try StoreFixture()
        let id = try store.store("for alice", ttl: 7_200)
        let old = try store.token()
        store.now += store.logic.settings.tokenLifetimeMs + 1
        let fresh = try store.token()
        let device = StoreSession(peerAddress: "10.0.0.5", role: .device)
        for _ in 0..<50 {
            #expect(status(of: try store.send(.fetch(Fetch(id: id, token: old)), on: device)) == .tokenExpired)
        }
        for _ in 0..<store.logic.settings.badTokensPerAddress - 1 {
            _ = try store.send(.fetch(Fetch(id: id, token: Self.forged(fresh))), on: device)
        }
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: fresh)), on: device)) == .ok, "19 failures: still served")
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: Self.forged(fresh))), on: device)) == .badToken, "the 20th is answered")
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: fresh)), on: device)) == .rateLimited)
        // LOGIN is not a token-bearing request; it has its own limits.
        #expect(status(of: try store.send(.login(Login(user: "alice", password: Array("pw-alice".utf8), deviceID: "phone")), on: device)) == .ok)
    }

    @Test("[8-5] failed-token windows are forgotten once they end")
    func tableShrinks() throws {
        let store = try StoreFixture()
        let forged = Self.forged(try store.token())
        for index in 0..<10 {
            let session = StoreSession(peerAddress: "10.0.1.\(index)", role: .device)
            _ = try store.send(.sync(Sync(token: forged, cursor: 0, limit: 1)), on: session)
        }
        #expect(store.logic.badTokenAddressesTracked == 10)
        store.logic.pruneLimiters()
        #expect(store.logic.badTokenAddressesTracked == 10, "still inside their window")
        store.now += store.logic.settings.badTokenWindowMs
        store.logic.pruneLimiters()
        #expect(store.logic.badTokenAddressesTracked == 0)
    }
}
