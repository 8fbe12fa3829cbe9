import Foundation
@testable import PushStoreLogic
import Testing
import PushWire
@testable import PushStore

/// The throttle behind a reference, so a test can drive it inside `#expect`.
private final class Limits {
    var throttle: LoginThrottle

    init(free: Int = 3, backoffMs: UInt64 = 1_000, maxBackoffMs: UInt64 = 8_000, perAddress: Int = 20, refillMs: UInt64 = 3_000) {
        throttle = LoginThrottle(LoginThrottle.Settings(freeFailures: free, backoffMs: backoffMs, maxBackoffMs: maxBackoffMs,
                                                        failuresPerAddress: perAddress, refillMs: refillMs, trustedForMs: 86_400_000))
    }

    func begin(user: String, address: String, nowMs: UInt64) -> LoginThrottle.Decision {
        throttle.begin(user: user, address: address, nowMs: nowMs)
    }

    func finish(_ user: String, from address: String, correct: Bool, at nowMs: UInt64) {
        throttle.finish(user: user, address: address, succeeded: correct, nowMs: nowMs)
    }

    /// One whole attempt; true if its password was checked.
    func attempt(_ user: String, from address: String, correct: Bool, at nowMs: UInt64) -> Bool {
        guard throttle.begin(user: user, address: address, nowMs: nowMs) == .check else { return false }
        finish(user, from: address, correct: correct, at: nowMs)
        return true
    }
}

@Suite("Login limits ([8-5])")
struct LoginThrottleTests {
    @Test("after the free failures each attempt waits, twice as long after each failure, up to the cap")
    func backoff() {
        let limits = Limits()
        var now: UInt64 = 1_000_000
        for _ in 0..<3 { #expect(limits.attempt("alice", from: "10.0.0.1", correct: false, at: now)) }
        for wait: UInt64 in [1_000, 2_000, 4_000, 8_000, 8_000] {
            #expect(limits.begin(user: "alice", address: "10.0.0.1", nowMs: now) == .refuse(retryAfterMs: wait))
            now += wait - 1
            #expect(limits.attempt("alice", from: "10.0.0.1", correct: false, at: now) == false, "one ms early")
            now += 1
            #expect(limits.attempt("alice", from: "10.0.0.1", correct: false, at: now))
        }
    }

    @Test("the guessed user logs in at once from any other address, and a success clears the pair")
    func otherAddressesUnaffected() {
        let limits = Limits()
        let now: UInt64 = 5_000
        for _ in 0..<3 { _ = limits.attempt("alice", from: "203.0.113.9", correct: false, at: now) }
        #expect(limits.attempt("alice", from: "203.0.113.9", correct: true, at: now) == false)
        #expect(limits.attempt("alice", from: "198.51.100.7", correct: true, at: now))
        #expect(limits.attempt("alice", from: "203.0.113.9", correct: true, at: now + 1_000))
        #expect(limits.attempt("alice", from: "203.0.113.9", correct: false, at: now + 1_000), "the pair starts afresh")
    }

    @Test("LOGINs sent together are all checked: one user's many devices behind one address log in at once")
    func burstOfDevices() {
        let limits = Limits(perAddress: 5)
        for _ in 0..<50 { #expect(limits.begin(user: "alice", address: "10.0.0.1", nowMs: 100) == .check) }
        for _ in 0..<50 { limits.finish("alice", from: "10.0.0.1", correct: true, at: 200) }
        #expect(limits.attempt("bob", from: "10.0.0.1", correct: true, at: 200), "successes spent nothing")
    }

    @Test("a burst of guesses sent together owes for every failure: the pair waits longer, the address goes into debt")
    func burstOfGuesses() {
        let limits = Limits(maxBackoffMs: 300_000, perAddress: 5, refillMs: 3_000)
        for _ in 0..<30 { #expect(limits.begin(user: "alice", address: "10.0.0.1", nowMs: 0) == .check) }
        for _ in 0..<30 { limits.finish("alice", from: "10.0.0.1", correct: false, at: 0) }
        #expect(limits.begin(user: "alice", address: "10.0.0.1", nowMs: 0) == .refuse(retryAfterMs: 300_000))
        // Five failures' worth of budget, thirty spent: twenty-six refills before the next.
        #expect(limits.begin(user: "bob", address: "10.0.0.1", nowMs: 0) == .refuse(retryAfterMs: 78_000))
        #expect(limits.begin(user: "bob", address: "10.0.0.1", nowMs: 78_000) == .check)
    }

    @Test("spraying names from one address runs out its budget; a user who logged in there before is exempt; successes spend nothing")
    func addressBudget() {
        let limits = Limits(perAddress: 5, refillMs: 3_000)
        let nat = "192.0.2.1"
        var now: UInt64 = 10_000
        #expect(limits.attempt("alice", from: nat, correct: true, at: now))
        for index in 0..<10 { #expect(limits.attempt("user\(index)", from: nat, correct: true, at: now), "successes give their share back") }
        for index in 0..<5 { #expect(limits.attempt("guess\(index)", from: nat, correct: false, at: now)) }
        #expect(limits.begin(user: "guess5", address: nat, nowMs: now) == .refuse(retryAfterMs: 3_000))
        #expect(limits.attempt("bob", from: nat, correct: true, at: now) == false, "a user new to this address waits for the budget")
        #expect(limits.attempt("bob", from: "192.0.2.2", correct: true, at: now), "and logs in from anywhere else")
        #expect(limits.attempt("alice", from: nat, correct: true, at: now), "alice logged in here before")
        #expect(limits.attempt("user3", from: nat, correct: false, at: now), "a trusted pair is held to its own backoff only")
        now += 3_000
        #expect(limits.attempt("bob", from: nat, correct: true, at: now), "the budget refills")
    }

    @Test("an IPv6 address counts by its /64; an IPv4-mapped address as the IPv4 address")
    func addressKeys() {
        #expect(LoginThrottle.addressKey("2001:db8:1:2:aaaa::1") == LoginThrottle.addressKey("2001:db8:1:2:bbbb::9"))
        #expect(LoginThrottle.addressKey("2001:db8:1:2::1") != LoginThrottle.addressKey("2001:db8:1:3::1"))
        #expect(LoginThrottle.addressKey("2001:db8:1:2::1") == "2001:db8:1:2::/64")
        #expect(LoginThrottle.addressKey("::ffff:192.0.2.1") == "192.0.2.1")
        #expect(LoginThrottle.addressKey("192.0.2.1") == "192.0.2.1")
        let limits = Limits(perAddress: 2)
        #expect(limits.attempt("a", from: "2001:db8::1", correct: false, at: 0))
        #expect(limits.attempt("b", from: "2001:db8::2", correct: false, at: 0))
        #expect(limits.attempt("c", from: "2001:db8::3", correct: false, at: 0) == false, "the same /64")
    }

    @Test("through the store: a guesser cannot keep the real user out, at another address or after the wait")
    func storeLogic() throws {
        let store = try StoreFixture()
        try store.enroll("phone")
        try store.enroll("bob-phone", user: "bob")
        let attacker = StoreSession(peerAddress: "203.0.113.9", role: .device)
        var refused = 0
        for guess in 0..<50 {
            let reply = try store.send(.login(Login(user: "alice", password: Array("guess \(guess)".utf8), deviceID: "d")), on: attacker)
            if status(of: reply) == .rateLimited { refused += 1 } else { #expect(status(of: reply) == .badCredentials) }
        }
        #expect(refused == 47, "three guesses checked, the rest held back")
        let phone = StoreSession(peerAddress: "198.51.100.7", role: .device)
        #expect(status(of: try store.send(.login(Login(user: "alice", password: Array("pw-alice".utf8), deviceID: "phone")), on: phone)) == .ok)
        // Twenty names sprayed from one address do not lock out a user who logged in there before.
        let nat = StoreSession(peerAddress: "192.0.2.1", role: .device)
        #expect(status(of: try store.send(.login(Login(user: "bob", password: Array("pw-bob".utf8), deviceID: "bob-phone")), on: nat)) == .ok)
        for index in 0..<25 { _ = try store.send(.login(Login(user: "name\(index)", password: [1], deviceID: "d")), on: nat) }
        #expect(status(of: try store.send(.login(Login(user: "name99", password: [1], deviceID: "d")), on: nat)) == .rateLimited)
        #expect(status(of: try store.send(.login(Login(user: "bob", password: Array("pw-bob".utf8), deviceID: "bob-phone")), on: nat)) == .ok)
    }
}
