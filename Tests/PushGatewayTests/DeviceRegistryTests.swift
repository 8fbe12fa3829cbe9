import Testing
import PushSecurity
import PushWire
@testable import PushGateway

/// Registrations signed as `securepush device enroll` signs them, on a clock the test sets.
struct RegistrationMaker {
    let serverKey = SecretKey(bytes: Array(repeating: 3, count: 32))!
    var nowMs: UInt64 = 1_700_000_000_000

    func credential(_ device: String, user: String = "alice", tags: [String] = [], issuedAt: UInt64? = nil,
                    lifetimeMs: UInt64 = 86_400_000, key: SecretKey? = nil) -> [UInt8] {
        let signer = CredentialSigner(serverKey: key ?? serverKey, purpose: CredentialSigner.registrationPurpose)
        let issued = issuedAt ?? nowMs
        return Registration(deviceID: device, user: user, tags: tags, issuedAt: issued, expiresAt: issued + lifetimeMs).signed(by: signer)
    }

    func registration(_ credential: [UInt8]) -> Registration {
        Registration.readUnverified(credential)!
    }
}

/// A REGISTRY_OK page.
func page(_ entries: [RegistryEntry], cursor: UInt64, hasMore: Bool = false) -> RegistryOK {
    RegistryOK(entries: entries, cursor: cursor, hasMore: hasMore)
}

func enrolled(_ credential: [UInt8]) -> RegistryEntry { RegistryEntry(state: .enrolled, credential: credential) }
func revoked(_ credential: [UInt8]) -> RegistryEntry { RegistryEntry(state: .revoked, credential: credential) }

@Suite("Device registry state")
struct DeviceRegistryTests {
    let maker = RegistrationMaker()

    func standing(_ registry: DeviceRegistry, _ credential: [UInt8], at nowMs: UInt64? = nil) -> RegistryStanding {
        registry.standing(of: credential, registration: maker.registration(credential), nowMs: nowMs ?? maker.nowMs)
    }

    func devices(_ registry: DeviceRegistry, _ target: PushTarget, at nowMs: UInt64? = nil) -> Set<String> {
        var found: Set<String> = []
        registry.forEachDevice(matching: target, nowMs: nowMs ?? maker.nowMs) { found.insert($0.deviceID) }
        return found
    }

    @Test("[7.4-4] loaded only once a page says has_more = 0; the cursor follows the replies")
    func loading() {
        var registry = DeviceRegistry(serverKey: maker.serverKey)
        let phone = maker.credential("phone")
        let tablet = maker.credential("tablet")
        var update = registry.apply(page([enrolled(phone)], cursor: 4, hasMore: true), nowMs: maker.nowMs)
        #expect(!registry.isLoaded && !update.becameLoaded)
        #expect(registry.cursor == 4)
        update = registry.apply(page([enrolled(tablet)], cursor: 9), nowMs: maker.nowMs)
        #expect(registry.isLoaded && update.becameLoaded)
        #expect(registry.cursor == 9 && registry.enrolledCount == 2)
        update = registry.apply(page([], cursor: 9), nowMs: maker.nowMs)
        #expect(!update.becameLoaded, "loaded once")
        #expect(update.changedDevices.isEmpty)
    }

    @Test("[7.4-4] a HELLO's registration must be the enrolled one, byte for byte, and unexpired")
    func standings() {
        var registry = DeviceRegistry(serverKey: maker.serverKey)
        let phone = maker.credential("phone")
        _ = registry.apply(page([enrolled(phone)], cursor: 1), nowMs: maker.nowMs)
        #expect(standing(registry, phone) == .enrolled)
        #expect(standing(registry, maker.credential("laptop")) == .notEnrolled)
        // Signed by the server key too, but never enrolled: a later issue of the same id.
        #expect(standing(registry, maker.credential("phone", issuedAt: maker.nowMs + 5)) == .notEnrolled)
        // An older one of an enrolled device id was replaced by the enrolled one.
        #expect(standing(registry, maker.credential("phone", issuedAt: maker.nowMs - 5)) == .revoked)
        #expect(standing(registry, phone, at: maker.nowMs + 86_400_000) == .notEnrolled, "expired")
    }

    @Test("revoking the enrolled registration: refused as revoked, no target matches it")
    func revocation() {
        var registry = DeviceRegistry(serverKey: maker.serverKey)
        let phone = maker.credential("phone", tags: ["news"])
        _ = registry.apply(page([enrolled(phone)], cursor: 1), nowMs: maker.nowMs)
        let update = registry.apply(page([revoked(phone)], cursor: 2), nowMs: maker.nowMs)
        #expect(update.revocations == 1)
        #expect(update.revokedDevices == ["phone"] && update.changedDevices == ["phone"])
        #expect(standing(registry, phone) == .revoked)
        #expect(devices(registry, .device("phone")).isEmpty && devices(registry, .user("alice")).isEmpty)
        #expect(devices(registry, .tag("news")).isEmpty)
        #expect(registry.enrolledCount == 0 && registry.revokedCount == 1)
    }

    @Test("enrolling a device id again replaces its registration, which counts as revoked")
    func reenrolment() {
        var registry = DeviceRegistry(serverKey: maker.serverKey)
        let old = maker.credential("phone", tags: ["a"])
        let new = maker.credential("phone", user: "bob", tags: ["b"], issuedAt: maker.nowMs + 1)
        _ = registry.apply(page([enrolled(old)], cursor: 1), nowMs: maker.nowMs)
        // The store lists the new enrolment and the old registration's revocation; in either order.
        let update = registry.apply(page([enrolled(new), revoked(old)], cursor: 3), nowMs: maker.nowMs)
        #expect(update.revocations == 1, "the replacement is one revocation; the revoked entry then names a registration no longer enrolled")
        #expect(update.revokedDevices == ["phone"])
        #expect(standing(registry, old) == .revoked)
        #expect(standing(registry, new) == .enrolled)
        #expect(devices(registry, .user("alice")).isEmpty && devices(registry, .tag("a")).isEmpty)
        #expect(devices(registry, .user("bob")) == ["phone"] && devices(registry, .tag("b")) == ["phone"])
    }

    @Test("a revocation listed before the new enrolment leaves the same state")
    func reenrolmentOtherOrder() {
        var registry = DeviceRegistry(serverKey: maker.serverKey)
        let old = maker.credential("phone")
        let new = maker.credential("phone", issuedAt: maker.nowMs + 1)
        _ = registry.apply(page([enrolled(old)], cursor: 1), nowMs: maker.nowMs)
        let update = registry.apply(page([revoked(old), enrolled(new)], cursor: 3), nowMs: maker.nowMs)
        #expect(update.revocations == 1)
        #expect(standing(registry, old) == .revoked && standing(registry, new) == .enrolled)
        #expect(registry.enrolledCount == 1)
    }

    @Test("entries that do not verify under the server key are ignored and counted")
    func forgedEntries() {
        var registry = DeviceRegistry(serverKey: maker.serverKey)
        let phone = maker.credential("phone")
        _ = registry.apply(page([enrolled(phone)], cursor: 1), nowMs: maker.nowMs)
        let otherKey = SecretKey(bytes: Array(repeating: 9, count: 32))!
        let forged = maker.credential("mallory", key: otherKey)
        var flipped = phone
        flipped[flipped.count - 1] ^= 1
        let update = registry.apply(page([enrolled(forged), revoked(flipped), enrolled([1, 2, 3])], cursor: 4), nowMs: maker.nowMs)
        #expect(update.ignored == 3 && update.enrolled == 0 && update.revocations == 0)
        #expect(standing(registry, phone) == .enrolled, "a revocation that does not verify revokes nothing")
        #expect(devices(registry, .device("mallory")).isEmpty)
        #expect(registry.cursor == 4, "the cursor still moves past them")
    }

    @Test("[4.13-7] targets match enrolled, unexpired devices by id, user and tag")
    func targets() {
        var registry = DeviceRegistry(serverKey: maker.serverKey)
        let entries = [
            enrolled(maker.credential("phone", tags: ["news", "sport"])),
            enrolled(maker.credential("tablet", tags: ["news"], lifetimeMs: 1_000)),
            enrolled(maker.credential("bobs", user: "bob", tags: ["sport"])),
        ]
        _ = registry.apply(page(entries, cursor: 3), nowMs: maker.nowMs)
        #expect(devices(registry, .user("alice")) == ["phone", "tablet"])
        #expect(devices(registry, .tag("news")) == ["phone", "tablet"])
        #expect(devices(registry, .tag("sport")) == ["phone", "bobs"])
        #expect(devices(registry, .device("bobs")) == ["bobs"])
        #expect(devices(registry, .device("nobody")).isEmpty)
        let later = maker.nowMs + 2_000
        #expect(devices(registry, .tag("news"), at: later) == ["phone"], "tablet's registration expired")
        #expect(registry.removeExpired(nowMs: later) == ["tablet"])
        #expect(registry.enrolledCount == 2)
        #expect(devices(registry, .user("alice")) == ["phone"])
    }

    @Test("expired entries are not kept; revoked ones are forgotten once they expire")
    func expiry() {
        var registry = DeviceRegistry(serverKey: maker.serverKey)
        let stale = maker.credential("old", issuedAt: maker.nowMs - 10_000, lifetimeMs: 5_000)
        let phone = maker.credential("phone", lifetimeMs: 1_000)
        let update = registry.apply(page([enrolled(stale), enrolled(phone), revoked(phone)], cursor: 3), nowMs: maker.nowMs)
        #expect(update.expired == 1 && update.ignored == 0)
        #expect(registry.enrolledCount == 0 && registry.revokedCount == 1)
        _ = registry.removeExpired(nowMs: maker.nowMs + 1_000)
        #expect(registry.revokedCount == 0)
    }
}
